import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLocalJWKSet, decodeJwt, decodeProtectedHeader, importPKCS8, jwtVerify, SignJWT, type JSONWebKeySet } from 'jose';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CardGatewayClient, SessionEndedError } from '../../client/src/index.js';
import { startSandboxConnector, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { loadConfig } from '../../src/config/load-config.js';
import { ManualClock } from '../../src/foundation/clock.js';
import { listenGateway, type RunningGateway } from '../../src/server.js';
import { createRedisClient, waitUntilReady } from '../../src/store/redis/redis-client.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { HOUR, MINUTE, SECOND, T0 } from '../support/auth-requests.js';
import {
  createTestGateway,
  PASSWORD,
  rawTestConfig,
  testCertificatePem,
  writeTestConfig,
  type RawConfig,
  type TestGateway,
} from '../support/gateway-fixture.js';
import { deleteKeysWithPrefix, openReplicaStore, requireRedisUrl, TEST_COMMAND_TIMEOUT_MS, uniquePrefix } from '../support/redis.js';
import { call, cardBody, gatewayCli, metricSum, postCard, runToExit, scrape, type HttpAnswer } from './support.js';

/**
 * docs/runbooks/rotate-signing-key.md, performed step by step on two replicas (each its own Redis
 * client on one namespace, each listening on real TLS) with one injected clock: the keys made
 * with the runbook's openssl commands, every config checked with the compiled `--check-config`,
 * every phase applied as a rolling restart (replica A first, B still on the previous config),
 * and after each step what the runbook says clients see: JWKS contents on every replica, which
 * kid new tokens carry, which tokens and sessions keep working (card requests, refreshes) on
 * both replicas, ID tokens verified offline with the published JWKS, the token-failure metric.
 *
 * Two rotations: a scheduled one (retire after the wait the runbook names, which cuts no
 * session) and a leaked key (phases back to back: the key is refused everywhere at once,
 * forged tokens included, and sessions whose access token it signed log in again).
 */

const OLD = 'sbx-2026-11';
const NEW = 'sbx-2026-12';
const ISSUER = 'https://sandbox.test/';
const AUDIENCE = 'card-issuing-sandbox';
/** `tokens.clockToleranceSeconds`, the default, which the runbook's wait adds to the token lifetime. */
const TOLERANCE_SECONDS = 5;

/** A login's answer (a refresh replaces all but the ID token). */
interface Session {
  accessToken: string;
  accessTokenExpiresAt: number;
  idToken: string;
  refreshToken: string;
  refreshTokenExpiresAt: number;
}

type ReplicaName = 'a' | 'b';

interface Replica {
  gw: TestGateway;
  running: RunningGateway;
  store: RedisStore;
}

/** The runbook's text, whose shell checks the test runs as written. */
const RUNBOOK = readFileSync(new URL('../../docs/runbooks/rotate-signing-key.md', import.meta.url), 'utf8');

/** The one line of a shell block of the runbook that contains `marker`, with its expected output (the `# ` line after it). */
function runbookCommand(marker: string): { command: string; expected: string } {
  const lines = RUNBOOK.split('\n').map((line) => line.trim());
  const index = lines.findIndex((line) => line.includes(marker) && !line.startsWith('#'));
  expect(index, `the runbook has a command with ${marker}`).toBeGreaterThanOrEqual(0);
  // A command continued on the next line (`| node -p ...`) is joined.
  const first = lines[index] ?? '';
  const command = lines[index + 1]?.startsWith('|') ? `${first.replace(/\\$/, '')} ${lines[index + 1]}` : first;
  const expected = lines.slice(index + 1).find((line) => line.startsWith('# '));
  return { command, expected: expected?.slice(2) ?? '' };
}

const kidOf = (token: string): string | undefined => decodeProtectedHeader(token).kid;
const codeOf = (answer: HttpAnswer): string => `${answer.status} ${(JSON.parse(answer.body) as { code?: string }).code ?? ''}`.trim();

/** One environment's deployment: its secrets folder, its config files, its two replicas. */
class Deployment {
  readonly prefix = uniquePrefix('signing-key-runbook');
  readonly dir: string;
  readonly clock = new ManualClock(T0);
  readonly replicas = new Map<ReplicaName, Replica>();
  #base: RawConfig = {};
  #configs = 0;

  constructor(
    readonly ca: string,
    readonly connectorUrl: string,
  ) {
    this.dir = mkdtempSync(join(tmpdir(), 'signing-runbook-'));
  }

  /** Runbook, phase 1 (and phase 2 for the old key's public half): the openssl commands, with umask 077. */
  async makeKeyPair(kid: string): Promise<void> {
    const made = await runToExit(
      'bash',
      ['-c', `umask 077 && openssl genpkey -algorithm ed25519 -out signing-${kid}.key && openssl pkey -in signing-${kid}.key -pubout -out signing-${kid}.pub`],
      { cwd: this.dir },
    );
    expect(made.code, made.stderr).toBe(0);
  }

  keyFile = (kid: string, half: 'key' | 'pub'): string => join(this.dir, `signing-${kid}.${half}`);

  /** Writes the config of one phase (one file for every replica, as the runbook's one ConfigMap) and checks it. */
  async config(signing: string, verification: readonly string[]): Promise<string> {
    if (this.#configs === 0) {
      this.#base = await rawTestConfig({
        trustedProxies: [],
        store: { kind: 'redis', redis: { url: requireRedisUrl(), keyPrefix: this.prefix } },
        connector: { url: this.connectorUrl, timeoutMs: 5000 },
        rateLimits: { login: { points: 100, windowSeconds: 60 }, refresh: { points: 100, windowSeconds: 60 } },
      });
      // The credentials file (and the folder's layout) as the other runbook tests write it.
      const written = await writeTestConfig(this.#base);
      writeFileSync(join(this.dir, 'credentials.yaml'), readFileSync(written.credentialsFile));
      rmSync(written.dir, { recursive: true, force: true });
    }
    this.#configs += 1;
    const file = join(this.dir, `gateway-${this.#configs}.yaml`);
    const tokens = {
      issuer: ISSUER,
      audience: AUDIENCE,
      signingKey: { kid: signing, privateKey: { file: this.keyFile(signing, 'key') } },
      ...(verification.length > 0 && { verificationKeys: verification.map((kid) => ({ kid, publicKey: { file: this.keyFile(kid, 'pub') } })) }),
    };
    writeFileSync(file, stringify({ ...this.#base, tokens }));
    // Runbook: "Check it (`--check-config`)" with the compiled gateway, as an operator runs it.
    const check = await gatewayCli(['--check-config', file]);
    expect(check.code, `${check.stdout}\n${check.stderr}`).toBe(0);
    return file;
  }

  async start(name: ReplicaName, configFile: string): Promise<void> {
    const config = await loadConfig(configFile, {}, { clock: this.clock });
    const store = await openReplicaStore(this.prefix);
    const gw = await createTestGateway({ config, clock: this.clock, store });
    const running = await listenGateway(gw.gateway, { https: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 } });
    this.replicas.set(name, { gw, running, store });
  }

  async stop(name: ReplicaName): Promise<void> {
    const replica = this.replicas.get(name);
    if (!replica) return;
    this.replicas.delete(name);
    await replica.running.close();
    await replica.gw.close();
    await replica.store.close();
  }

  /** Runbook: "restart every replica", one at a time; `between` runs while A has the new config and B the old. */
  async rollingRestart(configFile: string, between?: () => Promise<void>): Promise<void> {
    await this.stop('a');
    await this.start('a', configFile);
    await between?.();
    await this.stop('b');
    await this.start('b', configFile);
  }

  url(name: ReplicaName): string {
    const replica = this.replicas.get(name);
    if (!replica) throw new Error(`replica ${name} is not running`);
    return replica.running.httpsUrl;
  }

  async jwks(name: ReplicaName): Promise<JSONWebKeySet> {
    const answer = await call(`${this.url(name)}/.well-known/jwks.json`, { ca: this.ca });
    expect(answer.status, answer.body).toBe(200);
    return JSON.parse(answer.body) as JSONWebKeySet;
  }

  async kids(name: ReplicaName): Promise<string[]> {
    return (await this.jwks(name)).keys.map((key) => String(key.kid)).sort();
  }

  async login(name: ReplicaName, username = 'full'): Promise<Session> {
    const answer = await call(`${this.url(name)}/api/v1/auth/login`, { ca: this.ca, body: JSON.stringify({ username, password: PASSWORD }) });
    expect(answer.status, answer.body).toBe(200);
    return JSON.parse(answer.body) as Session;
  }

  refresh(name: ReplicaName, accessToken: string, refreshToken: string): Promise<HttpAnswer> {
    return call(`${this.url(name)}/api/v1/auth/refresh`, {
      ca: this.ca,
      headers: { authorization: `Bearer ${accessToken}` },
      body: JSON.stringify({ refreshToken }),
    });
  }

  /** A refresh that must succeed: the session with its new tokens (the ID token stays the login's). */
  async refreshed(name: ReplicaName, session: Session): Promise<Session> {
    const answer = await this.refresh(name, session.accessToken, session.refreshToken);
    expect(answer.status, answer.body).toBe(200);
    return { ...session, ...(JSON.parse(answer.body) as Omit<Session, 'idToken'>) };
  }

  card(name: ReplicaName, accessToken: string): Promise<HttpAnswer> {
    return postCard(this.url(name), this.ca, accessToken, cardBody());
  }

  /** The token is accepted on both replicas: a card request with it is 201 on each. */
  async acceptedEverywhere(accessToken: string): Promise<void> {
    for (const name of ['a', 'b'] as const) {
      const answer = await this.card(name, accessToken);
      expect(answer.status, `${name}: ${answer.body}`).toBe(201);
    }
  }

  /** Runbook, phase 1 "Verify": the JWKS loop, run as written against one replica (GATEWAY and $TLS filled in). */
  async jwksLoop(name: ReplicaName): Promise<string> {
    const { command, expected } = runbookCommand('https://GATEWAY/.well-known/jwks.json');
    const caFile = join(this.dir, 'ca.pem');
    writeFileSync(caFile, this.ca);
    // Three rounds rather than the runbook's 20 (each starts node once): one replica answers them all here.
    expect(command).toContain('$(seq 1 20)');
    const filled = command.replace('GATEWAY', new URL(this.url(name)).host).replace('$(seq 1 20)', '$(seq 1 3)');
    const ran = await runToExit('bash', ['-c', filled], { env: { TLS: `--cacert ${caFile}` } });
    expect(ran.code, ran.stderr).toBe(0);
    expect(expected).toBe(`20 ${OLD} ${NEW}`);
    return ran.stdout.trim().replace(/\s+/g, ' ');
  }

  /** Runbook, phase 2 "Verify": the kid of an access token, with the runbook's command. */
  static async kidByRunbook(accessToken: string): Promise<string> {
    const { command } = runbookCommand('cut -d. -f1');
    const ran = await runToExit('bash', ['-c', command], { env: { ACCESS_TOKEN: accessToken } });
    expect(ran.code, ran.stderr).toBe(0);
    return ran.stdout.trim();
  }

  async counter(name: ReplicaName, metric: string, labels: Record<string, string>): Promise<number> {
    const replica = this.replicas.get(name);
    if (!replica) throw new Error(`replica ${name} is not running`);
    return metricSum(await scrape(replica.running.adminUrl), metric, labels) ?? 0;
  }

  async tokenFailures(name: ReplicaName, reason: string): Promise<number> {
    const replica = this.replicas.get(name);
    if (!replica) throw new Error(`replica ${name} is not running`);
    return metricSum(await scrape(replica.running.adminUrl), 'gateway_token_failures_total', { reason }) ?? 0;
  }

  async close(): Promise<void> {
    for (const name of ['a', 'b'] as const) await this.stop(name);
    const plain = createRedisClient({ url: requireRedisUrl(), commandTimeoutMs: TEST_COMMAND_TIMEOUT_MS, connectTimeoutMs: 5_000 });
    plain.on('error', () => undefined);
    try {
      if (await waitUntilReady(plain, 5_000)) await deleteKeysWithPrefix(plain, this.prefix);
    } finally {
      plain.disconnect();
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** An integrator's offline check of an ID token against a JWKS it fetched (D24). */
async function verifiesOffline(idToken: string, jwks: JSONWebKeySet, clock: ManualClock): Promise<boolean> {
  try {
    await jwtVerify(idToken, createLocalJWKSet(jwks), { issuer: ISSUER, audience: 'full', currentDate: new Date(clock.now()) });
    return true;
  } catch {
    return false;
  }
}

describe('the signing-key runbook, performed on two replicas sharing Redis', () => {
  let connector: RunningSandboxConnector;
  let ca: string;
  const deployments: Deployment[] = [];

  beforeAll(async () => {
    [connector, ca] = await Promise.all([startSandboxConnector({ host: '127.0.0.1', port: 0 }), testCertificatePem()]);
  }, 60_000);

  afterAll(async () => {
    for (const deployment of deployments) await deployment.close();
    await connector?.close();
  });

  async function deployment(): Promise<{ env: Deployment; original: string }> {
    const env = new Deployment(ca, connector.url);
    deployments.push(env);
    await env.makeKeyPair(OLD);
    // Before the rotation: the old key signs, nothing else is listed.
    const original = await env.config(OLD, []);
    await env.start('a', original);
    await env.start('b', original);
    for (const name of ['a', 'b'] as const) expect(await env.kids(name)).toEqual([OLD]);
    return { env, original };
  }

  describe('a scheduled rotation', () => {
    let env: Deployment;
    let original: string;
    /** Logged in before the rotation started: an old-key session. */
    let early: Session;
    /** Logged in on B (still signing with the old key) during the switch's rollout: the last old-key tokens. */
    let last: Session;
    /** The instant the switch's rollout finished (B restarted). */
    let switchedAt: number;
    /** The last old-key access token, never refreshed, expired before the retirement. */
    let stale: string;

    beforeAll(async () => {
      ({ env, original } = await deployment());
      early = await env.login('a');
      expect(kidOf(early.accessToken)).toBe(OLD);
    }, 60_000);

    it('1. publish: both kids in the JWKS of every replica, old tokens still accepted, nothing signed with the new key', async () => {
      await env.makeKeyPair(NEW);
      const published = await env.config(OLD, [NEW]);
      await env.rollingRestart(published, async () => {
        // Mid-rollout: A publishes both, B still the old one; the old key's tokens work on both.
        expect(await env.kids('a')).toEqual([NEW, OLD].sort());
        expect(await env.kids('b')).toEqual([OLD]);
        await env.acceptedEverywhere(early.accessToken);
      });
      for (const name of ['a', 'b'] as const) {
        expect(await env.kids(name)).toEqual([NEW, OLD].sort());
        expect(kidOf((await env.login(name)).accessToken)).toBe(OLD);
        expect(await env.tokenFailures(name, 'token_invalid')).toBe(0);
      }
      await env.acceptedEverywhere(early.accessToken);
      expect(await verifiesOffline(early.idToken, await env.jwks('b'), env.clock)).toBe(true);
      // The runbook's own check, as written (fewer rounds): every answer lists both kids.
      for (const name of ['a', 'b'] as const) expect(await env.jwksLoop(name)).toBe(`3 ${OLD} ${NEW}`);
    });

    it('2. switch: new tokens carry the new kid, tokens of either key verify on both replicas during and after the rollout', async () => {
      env.clock.advance(5 * MINUTE);
      const switched = await env.config(NEW, [OLD]);
      await env.rollingRestart(switched, async () => {
        // Mid-rollout: A signs with the new key, B (phase 1 config) still with the old; each accepts the other's tokens.
        const fromA = await env.login('a');
        expect(kidOf(fromA.accessToken)).toBe(NEW);
        expect(kidOf(fromA.idToken)).toBe(NEW);
        last = await env.login('b');
        expect(kidOf(last.accessToken)).toBe(OLD);
        await env.acceptedEverywhere(fromA.accessToken);
        await env.acceptedEverywhere(last.accessToken);
        expect(kidOf((await env.refreshed('b', fromA)).accessToken)).toBe(OLD);
      });
      switchedAt = env.clock.now();
      for (const name of ['a', 'b'] as const) {
        expect(await env.kids(name)).toEqual([NEW, OLD].sort());
        const fresh = await env.login(name);
        expect(await Deployment.kidByRunbook(fresh.accessToken)).toBe(NEW);
        expect(await verifiesOffline(fresh.idToken, await env.jwks(name), env.clock)).toBe(true);
        expect(await env.tokenFailures(name, 'token_invalid')).toBe(0);
      }
      // "A token issued before the switch still works (a refresh or a card request with it is not 401)."
      await env.acceptedEverywhere(early.accessToken);
      early = await env.refreshed('b', early);
      expect(kidOf(early.accessToken)).toBe(NEW);
      expect(await verifiesOffline(last.idToken, await env.jwks('a'), env.clock)).toBe(true);
    });

    it('why phase 1 comes first: a replica that does not list the new key yet refuses its tokens with 401 token_invalid', async () => {
      const fresh = await env.login('a');
      expect(kidOf(fresh.accessToken)).toBe(NEW);
      // A replica still on the config from before the rotation (phase 1 skipped), briefly beside the two.
      const a = env.replicas.get('a')!;
      env.replicas.delete('a');
      await env.start('a', original);
      try {
        expect(codeOf(await env.card('a', fresh.accessToken))).toBe('401 token_invalid');
        expect(codeOf(await env.refresh('a', fresh.accessToken, fresh.refreshToken))).toBe('401 token_invalid');
      } finally {
        await env.stop('a');
        env.replicas.set('a', a);
      }
    });

    it('the wait before retiring: the last old-key token lives until one lifetime plus the tolerance after the switch finished', async () => {
      // Clients refresh inside the 300 s the interface advises, on either replica: their new tokens are the new key's.
      env.clock.set(switchedAt + HOUR - 4 * MINUTE);
      const kept = await env.refreshed('a', last);
      expect(kidOf(kept.accessToken)).toBe(NEW);
      early = await env.refreshed('b', early);
      // A client that never refreshed: its old-key token is still good just inside the wait...
      env.clock.set(switchedAt + HOUR + (TOLERANCE_SECONDS - 1) * SECOND);
      await env.acceptedEverywhere(last.accessToken);
      // ...and past it expired anyway (the interface: an expired access token means a new login).
      env.clock.set(switchedAt + HOUR + (TOLERANCE_SECONDS + 1) * SECOND);
      for (const name of ['a', 'b'] as const) expect(codeOf(await env.card(name, last.accessToken))).toBe('401 token_expired');
      stale = last.accessToken;
      last = kept;
    });

    it('3. retire 70 minutes after the switch: JWKS lists the new key only, every session that kept refreshing goes on', async () => {
      env.clock.set(switchedAt + 70 * MINUTE);
      const retired = await env.config(NEW, []);
      await env.rollingRestart(retired, async () => {
        // Mid-rollout: A lists the new key only, B both; the sessions work on both.
        expect(await env.kids('a')).toEqual([NEW]);
        expect(await env.kids('b')).toEqual([NEW, OLD].sort());
        await env.acceptedEverywhere(last.accessToken);
      });
      for (const name of ['a', 'b'] as const) expect(await env.kids(name)).toEqual([NEW]);
      // Both sessions from before the switch, refreshed as clients do, refresh on both replicas and work.
      const refreshesBefore = await Promise.all((['a', 'b'] as const).map((name) => env.counter(name, 'gateway_refreshes_total', { outcome: 'succeeded' })));
      for (const session of [early, last]) {
        let current = session;
        for (const name of ['a', 'b'] as const) {
          current = await env.refreshed(name, current);
          expect(kidOf(current.accessToken)).toBe(NEW);
        }
        await env.acceptedEverywhere(current.accessToken);
      }
      // "gateway_refreshes_total{outcome="succeeded"} keeps rising on every replica".
      for (const [index, name] of (['a', 'b'] as const).entries())
        expect(await env.counter(name, 'gateway_refreshes_total', { outcome: 'succeeded' })).toBe((refreshesBefore[index] ?? 0) + 2);
      // "gateway_token_failures_total{reason="token_invalid"} stays flat" (counted from the restart: 0).
      for (const name of ['a', 'b'] as const) expect(await env.tokenFailures(name, 'token_invalid')).toBe(0);
      // A rise means old-key tokens are still presented (a client that kept an expired token, a clock far
      // off): the retired kid is refused before the expiry is looked at.
      for (const name of ['a', 'b'] as const) {
        expect(codeOf(await env.card(name, stale))).toBe('401 token_invalid');
        expect(await env.tokenFailures(name, 'token_invalid')).toBe(1);
      }
    });
  });

  describe('the roll-backs of each phase', () => {
    let env: Deployment;
    let early: Session;

    beforeAll(async () => {
      ({ env } = await deployment());
      early = await env.login('a');
      await env.makeKeyPair(NEW);
    }, 60_000);

    it('phase 1: the new entry removed again, the JWKS back to the old kid, nothing breaks', async () => {
      await env.rollingRestart(await env.config(OLD, [NEW]));
      await env.rollingRestart(await env.config(OLD, []));
      for (const name of ['a', 'b'] as const) expect(await env.kids(name)).toEqual([OLD]);
      await env.acceptedEverywhere(early.accessToken);
      early = await env.refreshed('b', early);
    });

    it('phase 2: signing back to the old key with the new one listed; tokens the new key signed meanwhile keep working', async () => {
      await env.rollingRestart(await env.config(OLD, [NEW]));
      await env.rollingRestart(await env.config(NEW, [OLD]));
      const meanwhile = await env.login('a');
      expect(kidOf(meanwhile.accessToken)).toBe(NEW);
      await env.rollingRestart(await env.config(OLD, [NEW]));
      for (const name of ['a', 'b'] as const) {
        expect(await env.kids(name)).toEqual([NEW, OLD].sort());
        expect(kidOf((await env.login(name)).accessToken)).toBe(OLD);
      }
      await env.acceptedEverywhere(meanwhile.accessToken);
      expect(kidOf((await env.refreshed('b', meanwhile)).accessToken)).toBe(OLD);
    });

    it('phase 3: retired too early, a token inside its hour is refused; listing the old key again brings its session back', async () => {
      const inside = await env.login('b');
      expect(kidOf(inside.accessToken)).toBe(OLD);
      await env.rollingRestart(await env.config(NEW, [OLD]));
      env.clock.advance(10 * MINUTE);
      await env.rollingRestart(await env.config(NEW, []));
      for (const name of ['a', 'b'] as const) expect(codeOf(await env.refresh(name, inside.accessToken, inside.refreshToken))).toBe('401 token_invalid');
      await env.rollingRestart(await env.config(NEW, [OLD]));
      for (const name of ['a', 'b'] as const) expect(await env.kids(name)).toEqual([NEW, OLD].sort());
      await env.acceptedEverywhere(inside.accessToken);
      expect(kidOf((await env.refreshed('a', inside)).accessToken)).toBe(NEW);
    });
  });

  describe('a leaked key: the three phases back to back', () => {
    let env: Deployment;
    /** A session whose access token the leaked key signed, and that does not refresh before the retirement. */
    let idle: Session;
    /** A session whose client refreshed between the switch and the retirement. */
    let active: Session;
    /** A token minted by whoever holds the leaked key, from the claims of a token of the victim it has seen. */
    let forged: string;

    beforeAll(async () => {
      ({ env } = await deployment());
      idle = await env.login('a');
      active = await env.login('b', 'create-only');
      const leaked = await importPKCS8(readFileSync(env.keyFile(OLD, 'key'), 'utf8'), 'EdDSA');
      const seen = decodeJwt(idle.accessToken);
      forged = await new SignJWT({ ...seen, jti: randomUUID(), iat: Math.floor(env.clock.now() / 1000), exp: Math.floor(env.clock.now() / 1000) + 3600 })
        .setProtectedHeader({ alg: 'EdDSA', kid: OLD, typ: 'at+jwt' })
        .sign(leaked);
      // The leak is real: until the key goes, the forged token is as good as the victim's own, refresh included.
      await env.acceptedEverywhere(forged);
    }, 60_000);

    it('publish and switch at once: new logins carry the new kid, the leaked key still verifies until the retirement', async () => {
      await env.makeKeyPair(NEW);
      await env.rollingRestart(await env.config(OLD, [NEW]));
      await env.rollingRestart(await env.config(NEW, [OLD]));
      for (const name of ['a', 'b'] as const) expect(await env.kids(name)).toEqual([NEW, OLD].sort());
      env.clock.advance(2 * MINUTE);
      active = await env.refreshed('a', active);
      expect(kidOf(active.accessToken)).toBe(NEW);
    });

    it('retire at once: the leaked kid is gone from every JWKS and refused everywhere, forged tokens included, at refresh too', async () => {
      env.clock.advance(2 * MINUTE);
      const retired = await env.config(NEW, []);
      await env.rollingRestart(retired);
      for (const name of ['a', 'b'] as const) {
        expect(await env.kids(name)).toEqual([NEW]);
        expect(codeOf(await env.card(name, forged))).toBe('401 token_invalid');
        // A forged access token with a refresh token the holder stole: still refused.
        expect(codeOf(await env.refresh(name, forged, idle.refreshToken))).toBe('401 token_invalid');
      }
      // Offline ID-token checks with the new JWKS no longer trust the leaked key.
      expect(await verifiesOffline(idle.idToken, await env.jwks('a'), env.clock)).toBe(false);
      expect(await verifiesOffline((await env.login('a')).idToken, await env.jwks('b'), env.clock)).toBe(true);
    });

    it('a session whose access token the leaked key signed cannot refresh (401 token_invalid): it logs in again, and that works', async () => {
      for (const name of ['a', 'b'] as const) {
        expect(codeOf(await env.card(name, idle.accessToken))).toBe('401 token_invalid');
        expect(codeOf(await env.refresh(name, idle.accessToken, idle.refreshToken))).toBe('401 token_invalid');
      }
      const loginsBefore = await env.counter('b', 'gateway_logins_total', { outcome: 'succeeded' });
      const again = await env.login('b');
      expect(kidOf(again.accessToken)).toBe(NEW);
      expect(await env.counter('b', 'gateway_logins_total', { outcome: 'succeeded' })).toBe(loginsBefore + 1);
      await env.acceptedEverywhere(again.accessToken);
      await env.acceptedEverywhere((await env.refreshed('a', again)).accessToken);
      for (const name of ['a', 'b'] as const) expect(await env.tokenFailures(name, 'token_invalid')).toBeGreaterThanOrEqual(2);
    });

    it('a session that refreshed after the switch goes on, on both replicas', async () => {
      await env.acceptedEverywhere(active.accessToken);
      active = await env.refreshed('b', active);
      active = await env.refreshed('a', active);
      await env.acceptedEverywhere(active.accessToken);
    });

    it('the client package, resumed with a session the leaked key signed: the call ends the session (token_invalid), one login recovers', async () => {
      const client = new CardGatewayClient({ baseUrl: env.url('a'), ca, now: () => env.clock.now(), session: idle });
      const refused = await client.createCard({ cardLimit: 10_000, currency: 'EUR' }).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(refused).toBeInstanceOf(SessionEndedError);
      expect((refused as SessionEndedError).gatewayCode).toBe('token_invalid');
      await client.login('full', PASSWORD);
      const card = await client.createCard({ cardLimit: 10_000, currency: 'EUR' });
      expect(card.card).toMatchObject({ currency: 'EUR', status: 'active' });
    });
  });
});
