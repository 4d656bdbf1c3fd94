import { randomBytes } from 'node:crypto';
import { readFileSync, renameSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { parse, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandboxConnector, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { DEFAULT_CREDENTIALS, rawTestConfig, testCertificatePem, writeTestConfig, type RawConfig, type WrittenConfig } from '../support/gateway-fixture.js';
import { deleteKeysWithPrefix, requireRedisUrl, uniquePrefix } from '../support/redis.js';
import {
  auditLines,
  builtEntryPoints,
  call,
  cardBody,
  gatewayCli,
  killAll,
  metricSum,
  postCard,
  runToExit,
  scrape,
  signalAndWait,
  startGateway,
  waitForAudit,
  type GatewayProcess,
  type HttpAnswer,
  type LogLine,
} from './support.js';

/**
 * docs/runbooks/credentials.md, performed step by step on two replicas of the compiled gateway
 * (child processes) sharing one Redis namespace, with the credentials file both read: onboard (the
 * hash made from stdin, --check-config, SIGHUP, the verification the runbook names), deactivate,
 * reactivate (with a replica restarted while the credential was inactive), change a password,
 * rotate without a gap, and what each does to the tokens issued before (D7, D41).
 */

/** The credentials file keeps this mtime, so the file watcher never fires: SIGHUP reloads, as the runbook's second way. */
const FIXED_MTIME_SECONDS = 1_700_000_000;
const isReloadOutcome = (line: LogLine) => typeof line['msg'] === 'string' && /^configuration reload(ed| refused)/.test(line['msg']);

interface Entry {
  id: string;
  username: string;
  passwordHash: string;
  issuingAccount: string;
  permissions: string[];
  addressRanges: string[];
  active: boolean;
}

interface Tokens {
  accessToken: string;
  refreshToken: string;
}

describe('the credentials runbook, performed on two replicas (D7, D41)', () => {
  let connector: RunningSandboxConnector;
  let redis: Redis;
  let ca: string;
  let written: WrittenConfig;
  let secondConfig: string;
  const prefix = uniquePrefix('credentials-runbook');
  const replicas: { a?: GatewayProcess; b?: GatewayProcess } = {};
  const gateways = () => [replicas.a!, replicas.b!];
  const auditOf = (replica: 'a' | 'b') => join(written.dir, `audit-${replica}.jsonl`);

  /** Undone in reverse order after the suite, each as soon as what it undoes exists. */
  const undo: (() => Promise<void> | void)[] = [];

  beforeAll(async () => {
    const entry = builtEntryPoints();
    [connector, ca] = await Promise.all([startSandboxConnector({ host: '127.0.0.1', port: 0 }), testCertificatePem()]);
    undo.push(() => connector.close());
    redis = new Redis(requireRedisUrl(), { maxRetriesPerRequest: 1 });
    undo.push(async () => {
      await deleteKeysWithPrefix(redis, prefix);
      redis.disconnect();
    });
    const base: RawConfig = await rawTestConfig({
      trustedProxies: [],
      store: { kind: 'redis', redis: { url: requireRedisUrl(), keyPrefix: prefix } },
      connector: { url: connector.url, timeoutMs: 30_000 },
      rateLimits: { login: { points: 100, windowSeconds: 60 }, refresh: { points: 100, windowSeconds: 60 } },
    });
    // One credentials file, two config files (each replica its own audit file), as one environment's replicas.
    written = await writeTestConfig({ ...base, audit: { file: 'audit-a.jsonl' } }, DEFAULT_CREDENTIALS);
    undo.push(() => rmSync(written.dir, { recursive: true, force: true }));
    secondConfig = join(written.dir, 'gateway-b.yaml');
    writeFileSync(secondConfig, stringify({ ...base, audit: { file: 'audit-b.jsonl' } }));
    for (const file of [written.file, secondConfig, written.credentialsFile]) utimesSync(file, FIXED_MTIME_SECONDS, FIXED_MTIME_SECONDS);
    await entry;
    [replicas.a, replicas.b] = await Promise.all([startGateway(written.file), startGateway(secondConfig)]);
  }, 180_000);

  afterAll(async () => {
    await killAll();
    for (const step of undo.reverse()) await step();
  });

  // ------------------------------------------------------------------------------------------ steps

  /** Runbook, onboarding step 3: the password through stdin to the hash command. */
  async function hashOf(password: string): Promise<string> {
    const { hashPasswordJs } = await builtEntryPoints();
    const made = await runToExit('bash', ['-c', `printf '%s\\n' "$PASSWORD" | ${JSON.stringify(process.execPath)} ${JSON.stringify(hashPasswordJs)}`], {
      env: { PASSWORD: password },
    });
    expect(made.code, made.stderr).toBe(0);
    expect(made.stdout).not.toContain(password);
    return made.stdout.trim();
  }

  const entries = (): Entry[] => (parse(readFileSync(written.credentialsFile, 'utf8')) as { credentials: Entry[] }).credentials;

  /** Edits the credentials file the way an editor does (a new file renamed over the old). */
  function editCredentials(change: (list: Entry[]) => Entry[]): void {
    const temporary = `${written.credentialsFile}.next`;
    writeFileSync(temporary, stringify({ credentials: change(entries()) }));
    utimesSync(temporary, FIXED_MTIME_SECONDS, FIXED_MTIME_SECONDS);
    renameSync(temporary, written.credentialsFile);
  }
  const withEntry = (id: string, change: Partial<Entry>) => (list: Entry[]) => list.map((entry) => (entry.id === id ? { ...entry, ...change } : entry));

  /** Runbook, "Apply": SIGHUP every replica; "Verify": each logs `configuration reloaded` and audits it. */
  async function applyEverywhere(): Promise<void> {
    for (const [name, gateway] of [
      ['a', replicas.a!],
      ['b', replicas.b!],
    ] as const) {
      const before = auditLines(auditOf(name)).filter((line) => line.event === 'config.reloaded').length;
      const line = await signalAndWait(gateway, 'SIGHUP', isReloadOutcome);
      expect(line['msg'], JSON.stringify(line)).toBe('configuration reloaded');
      await waitForAudit(auditOf(name), () => auditLines(auditOf(name)).filter((l) => l.event === 'config.reloaded').length > before);
    }
  }

  const login = (gateway: GatewayProcess, username: string, password: string): Promise<HttpAnswer> =>
    call(`${gateway.httpsUrl}/api/v1/auth/login`, { ca, body: JSON.stringify({ username, password }), timeoutMs: 10_000 });
  async function loggedIn(gateway: GatewayProcess, username: string, password: string): Promise<Tokens> {
    const answer = await login(gateway, username, password);
    expect(answer.status, answer.body).toBe(200);
    return JSON.parse(answer.body) as Tokens;
  }
  const refresh = (gateway: GatewayProcess, bearer: string, refreshToken: string) =>
    call(`${gateway.httpsUrl}/api/v1/auth/refresh`, {
      ca,
      headers: { authorization: `Bearer ${bearer}` },
      body: JSON.stringify({ refreshToken }),
      timeoutMs: 10_000,
    });
  const codeOf = (answer: HttpAnswer) => `${answer.status} ${(JSON.parse(answer.body) as { code?: string }).code ?? ''}`.trim();
  const sessionsEnded = (name: 'a' | 'b', credential: string) =>
    auditLines(auditOf(name))
      .filter((line) => line.event === 'credential.sessions_ended' && line['credential'] === credential)
      .map((line) => line['reason']);

  // ------------------------------------------------------------------------------------------ the runbook

  const ACME = { id: 'cred-acme-travel-01', username: 'acme-travel' };
  const NEW_ACME = { id: 'cred-acme-travel-02', username: 'acme-travel-2' };
  let password = `first-${randomBytes(12).toString('base64url')}`;
  /** Sessions of acme-travel from before the deactivation, one per replica. */
  const earlier: Tokens[] = [];

  it('onboards a credential: hash from stdin, --check-config, apply, every replica reloaded, the login audited', async () => {
    const passwordHash = await hashOf(password);
    editCredentials((list) => [...list, { ...ACME, passwordHash, issuingAccount: 'acct-eu', permissions: ['cards:create'], addressRanges: [], active: true }]);
    const check = await gatewayCli(['--check-config', written.file]);
    expect(check.code, check.stderr).toBe(0);
    expect(check.stdout).toContain(`valid (environment sandbox, ${DEFAULT_CREDENTIALS.length + 1} credentials`);
    await applyEverywhere();
    for (const gateway of gateways()) {
      expect(metricSum(await scrape(gateway.adminUrl), 'gateway_config_reloads_total', { outcome: 'success' })).toBeGreaterThanOrEqual(1);
      expect(metricSum(await scrape(gateway.adminUrl), 'gateway_config_reloads_total', { outcome: 'failure' })).toBe(0);
      earlier.push(await loggedIn(gateway, ACME.username, password));
    }
    await waitForAudit(auditOf('a'), (line) => line.event === 'login.succeeded' && line['credential'] === ACME.id);
    expect((await postCard(replicas.b!.httpsUrl, ca, earlier[0]!.accessToken, cardBody())).status).toBe(201);
  });

  it('deactivates it: login 401 authentication_failed, earlier tokens 401 credential_inactive, sessions_ended audited on each replica', async () => {
    editCredentials(withEntry(ACME.id, { active: false }));
    await applyEverywhere();
    for (const gateway of gateways()) {
      const refused = await login(gateway, ACME.username, password);
      expect(codeOf(refused)).toBe('401 authentication_failed');
      for (const session of earlier) {
        expect(codeOf(await postCard(gateway.httpsUrl, ca, session.accessToken, cardBody()))).toBe('401 credential_inactive');
        expect(codeOf(await refresh(gateway, session.accessToken, session.refreshToken))).toBe('401 credential_inactive');
      }
      expect(metricSum(await scrape(gateway.adminUrl), 'gateway_access_denied_total', { reason: 'credential_inactive' })).toBeGreaterThanOrEqual(2);
    }
    for (const name of ['a', 'b'] as const) {
      expect(sessionsEnded(name, ACME.id)).toEqual(['deactivated']);
      await waitForAudit(auditOf(name), (line) => line.event === 'login.failed' && line['credential'] === ACME.id && line['reason'] === 'inactive');
    }
  });

  it('reactivates it: new logins work on both replicas (one restarted while it was inactive), earlier tokens stay dead', async () => {
    // Replica B restarts while the credential is inactive (a rollout, a crash).
    await replicas.b!.kill();
    replicas.b = await startGateway(secondConfig);
    editCredentials(withEntry(ACME.id, { active: true }));
    await applyEverywhere();
    for (const gateway of gateways()) {
      const fresh = await loggedIn(gateway, ACME.username, password);
      expect((await postCard(gateway.httpsUrl, ca, fresh.accessToken, cardBody())).status).toBe(201);
      for (const session of earlier) {
        expect(codeOf(await postCard(gateway.httpsUrl, ca, session.accessToken, cardBody()))).toBe('401 token_revoked');
        expect(codeOf(await refresh(gateway, fresh.accessToken, session.refreshToken))).toBe('401 refresh_token_revoked');
      }
      expect(metricSum(await scrape(gateway.adminUrl), 'gateway_access_denied_total', { reason: 'token_revoked' })).toBeGreaterThanOrEqual(2);
    }
    // A reactivation ends nothing more, and writes no sessions_ended line.
    expect(sessionsEnded('a', ACME.id)).toEqual(['deactivated']);
  });

  it('changes its password: the old one is refused, the new one works, sessions from before end on both replicas', async () => {
    const before = await Promise.all(gateways().map((gateway) => loggedIn(gateway, ACME.username, password)));
    const old = password;
    password = `second-${randomBytes(12).toString('base64url')}`;
    editCredentials(withEntry(ACME.id, { passwordHash: await hashOf(password) }));
    await applyEverywhere();
    for (const gateway of gateways()) {
      expect(codeOf(await login(gateway, ACME.username, old))).toBe('401 authentication_failed');
      const fresh = await loggedIn(gateway, ACME.username, password);
      for (const session of before) {
        expect(codeOf(await postCard(gateway.httpsUrl, ca, session.accessToken, cardBody()))).toBe('401 token_revoked');
        expect(codeOf(await refresh(gateway, fresh.accessToken, session.refreshToken))).toBe('401 refresh_token_revoked');
      }
      const rotated = await refresh(gateway, fresh.accessToken, fresh.refreshToken);
      expect(rotated.status, rotated.body).toBe(200);
    }
    for (const name of ['a', 'b'] as const) expect(sessionsEnded(name, ACME.id)).toContain('password_changed');
  });

  it('rotates without a gap: a second credential, then the first deactivated; the second keeps working throughout', async () => {
    const secondPassword = `rotated-${randomBytes(12).toString('base64url')}`;
    const passwordHash = await hashOf(secondPassword);
    editCredentials((list) => [
      ...list,
      { ...NEW_ACME, passwordHash, issuingAccount: 'acct-eu', permissions: ['cards:create'], addressRanges: [], active: true },
    ]);
    await applyEverywhere();
    const oldSession = await loggedIn(replicas.a!, ACME.username, password);
    const newSession = await loggedIn(replicas.b!, NEW_ACME.username, secondPassword);
    // Both work side by side while the integrator moves over.
    for (const gateway of gateways()) {
      expect((await postCard(gateway.httpsUrl, ca, oldSession.accessToken, cardBody())).status).toBe(201);
      expect((await postCard(gateway.httpsUrl, ca, newSession.accessToken, cardBody())).status).toBe(201);
    }
    editCredentials(withEntry(ACME.id, { active: false }));
    await applyEverywhere();
    for (const gateway of gateways()) {
      expect(codeOf(await postCard(gateway.httpsUrl, ca, oldSession.accessToken, cardBody()))).toBe('401 credential_inactive');
      expect((await postCard(gateway.httpsUrl, ca, newSession.accessToken, cardBody())).status).toBe(201);
    }
    const rotated = await refresh(replicas.a!, newSession.accessToken, newSession.refreshToken);
    expect(rotated.status, rotated.body).toBe(200);
    expect(sessionsEnded('a', NEW_ACME.id)).toEqual([]);
  });
});
