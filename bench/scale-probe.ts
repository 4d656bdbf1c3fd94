/**
 * `npm run bench:scale [-- --cards N --sessions S --refreshes R --sample K]`
 *
 * What the gateway's Redis holds at scale (issue 35). Starts a private redis-server, the sandbox
 * connector and a real gateway on it (HTTPS on loopback, in this process), then fills Redis
 * through the gateway's API, phase by phase: N cards (one idempotency record each, default
 * 10 000), S sessions (default 200) each refreshed 24 times (a day of hourly refreshes), K of
 * them (default 5) refreshed on to R refreshes in all (default 1 000). After each phase it reads
 * Redis: `INFO memory` (`used_memory` less client buffers, which counts the keyspace's and the
 * expiry table's share too) and `MEMORY USAGE` of every key of each record kind. It prints bytes per record of each kind and the
 * projection for a production load (PROJECTION), checks the targets (TARGETS), writes
 * bench/scale-results.json, and exits 1 when a target is missed.
 *
 * A record kind is a key pattern (RECORD_KINDS); a phase fills one kind through the API
 * (PHASES); the projection multiplies a kind's bytes per record by how many are alive at once.
 * Events (D63-D66) come as one more of each: their place is marked below.
 */
import { generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { stringify } from 'yaml';
import { composeGateway } from '../src/compose.js';
import { loadConfig } from '../src/config/load-config.js';
import { startSandboxConnector } from '../src/connector/sandbox/sandbox-connector.js';
import { hashPassword } from '../src/foundation/password-hash.js';
import { listenGateway } from '../src/server.js';
import { localhostCertificate } from '../tools/launch/certificate.js';
import { freePort } from '../tools/launch/ports.js';
import { killRedisServer, startLoopbackRedis } from '../tools/launch/redis-server.js';

const args = process.argv.slice(2);
const option = (name: string, fallback: number): number => {
  const at = args.indexOf(`--${name}`);
  const value = at >= 0 ? Number(args[at + 1]) : fallback;
  if (!Number.isSafeInteger(value) || value < 1) throw new Error(`--${name} takes a positive integer`);
  return value;
};
const CARDS = option('cards', 10_000);
const SESSIONS = option('sessions', 200);
/** A day of hourly refreshes: what each session of the projection has been through. */
const DAILY_REFRESHES = 24;
const REFRESHES = option('refreshes', 1_000);
const SAMPLE = Math.min(option('sample', 5), SESSIONS);
/** Requests in flight at once while filling (cards; sessions refresh each one after another). */
const CONCURRENCY = 32;
const PREFIX = 'cig:production:';
const PASSWORD = 'scale-probe-password-not-secret';
const root = join(import.meta.dirname, '..', '..');

/** A kind of record the gateway keeps in Redis: its keys under the prefix. */
interface RecordKind {
  readonly name: string;
  /** SCAN MATCH pattern after the prefix. */
  readonly pattern: string;
}

const RECORD_KINDS = {
  card: { name: "a card's idempotency record", pattern: 'idem:*' },
  session: { name: 'a session (its refresh-token family)', pattern: 'ses:*' },
  lockout: { name: 'a failed-login count', pattern: 'lock:*' },
  limiter: { name: 'a rate-limit counter', pattern: 'rl:*' },
  // Events (D63-D66): `event: { name: 'a stored event', pattern: '<its key>:*' }` and, for the
  // deliveries, `delivery: { name: 'a pending delivery', pattern: '...' }`.
} satisfies Record<string, RecordKind>;
type KindName = keyof typeof RECORD_KINDS;

/** Each kind's keys at one moment: how many, and their `MEMORY USAGE`. */
interface KindSample {
  keys: number;
  bytes: { mean: number; min: number; max: number; total: number };
}

interface Snapshot {
  usedMemory: number;
  kinds: Record<KindName, KindSample>;
}

async function snapshot(redis: Redis): Promise<Snapshot> {
  const info = await redis.info('memory');
  const field = (name: string): number => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(info)?.[1] ?? 0);
  // Client buffers come and go with the traffic (and this probe's own replies): not records.
  const usedMemory = field('used_memory') - field('mem_clients_normal');
  const kinds = {} as Record<KindName, KindSample>;
  for (const [kind, { pattern }] of Object.entries(RECORD_KINDS) as [KindName, RecordKind][]) {
    const sizes: number[] = [];
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${PREFIX}${pattern}`, 'COUNT', 1000);
      cursor = next;
      const pipeline = redis.pipeline();
      for (const key of keys) pipeline.memory('USAGE', key);
      for (const [error, size] of (await pipeline.exec()) ?? []) if (!error) sizes.push(Number(size));
    } while (cursor !== '0');
    const total = sizes.reduce((a, b) => a + b, 0);
    const mean = sizes.length ? Math.round(total / sizes.length) : 0;
    kinds[kind] = { keys: sizes.length, bytes: { mean, min: sizes.length ? Math.min(...sizes) : 0, max: sizes.length ? Math.max(...sizes) : 0, total } };
  }
  return { usedMemory, kinds };
}

/** A gateway of its own on a private Redis, with limits raised so that only memory is measured. */
async function startGateway(redisUrl: string) {
  const dir = mkdtempSync(join(tmpdir(), 'gw-scale-'));
  const connector = await startSandboxConnector({ host: '127.0.0.1', port: 0 });
  const pems = await localhostCertificate();
  writeFileSync(join(dir, 'tls.crt'), pems.cert);
  writeFileSync(join(dir, 'tls.key'), pems.key);
  writeFileSync(join(dir, 'signing.key'), generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }));
  writeFileSync(join(dir, 'card.key'), randomBytes(32).toString('base64'));
  const passwordHash = await hashPassword(PASSWORD);
  writeFileSync(
    join(dir, 'credentials.yaml'),
    stringify({
      credentials: [
        {
          id: 'cred-travel-eu',
          username: 'travel-eu',
          passwordHash,
          issuingAccount: 'acct-travel-eu',
          permissions: ['cards:create', 'cards:reveal', 'cards:read'],
          addressRanges: [],
          active: true,
        },
      ],
    }),
  );
  const many = { points: 100_000_000, windowSeconds: 60 };
  writeFileSync(
    join(dir, 'gateway.yaml'),
    stringify({
      environment: 'sandbox',
      listeners: { https: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 } },
      tls: { cert: { file: 'tls.crt' }, key: { file: 'tls.key' } },
      trustedProxies: [],
      allowlist: ['127.0.0.0/8'],
      store: { kind: 'redis', redis: { url: redisUrl, keyPrefix: PREFIX } },
      connector: { url: connector.url, timeoutMs: 5000, connections: CONCURRENCY },
      tokens: { issuer: 'https://scale.invalid/', audience: 'card-issuing-scale', signingKey: { kid: 'scale-1', privateKey: { file: 'signing.key' } } },
      credentialsFile: 'credentials.yaml',
      issuingAccounts: { 'acct-travel-eu': { currencies: ['EUR'] } },
      cards: { encryptionKey: { kid: 'card-2026-01', key: { file: 'card.key' } } },
      audit: { file: 'audit.jsonl' },
      logging: { level: 'warn' },
      rateLimits: { login: many, loginPerAddress: many, refresh: many },
      limits: { perAddress: { requestsPerSecond: 1_000_000, inFlight: 100_000, connectionsPerSecond: 100_000 } },
    }),
  );
  const config = await loadConfig(join(dir, 'gateway.yaml'), {});
  const composed = await composeGateway(config, { logTo: join(dir, 'gateway.log') });
  const running = await listenGateway(composed.gateway, config.listeners);
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY, ca: pems.cert });
  const post = (path: string, body: unknown, token?: string): Promise<{ status: number; body: Record<string, unknown> }> =>
    new Promise((resolve, reject) => {
      const headers = { 'content-type': 'application/json', ...(token && { authorization: `Bearer ${token}` }) };
      const req = request(new URL(path, running.httpsUrl), { method: 'POST', agent, headers }, (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> }));
      });
      req.on('error', reject);
      req.end(JSON.stringify(body));
    });
  return {
    post,
    async close() {
      agent.destroy();
      await running.close();
      await composed.close();
      await connector.close();
    },
  };
}

type Gateway = Awaited<ReturnType<typeof startGateway>>;

async function expectStatus(answer: Promise<{ status: number; body: Record<string, unknown> }>, status: number, what: string) {
  const { status: got, body } = await answer;
  if (got !== status) throw new Error(`${what}: ${got} ${JSON.stringify(body)}`);
  return body;
}

/** Runs `count` tasks, `CONCURRENCY` at a time. */
async function inParallel(count: number, task: (index: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(CONCURRENCY, count) }, async () => {
      while (next < count) await task(next++);
    }),
  );
}

interface Session {
  accessToken: string;
  refreshToken: string;
}

/** The fills, in order; each adds records of one kind through the API (events go here too). */
const PHASES = [
  {
    name: 'cards',
    kind: 'card' as KindName,
    count: CARDS,
    async fill(gw: Gateway, session: Session, count = CARDS) {
      await inParallel(count, async () => {
        const body = {
          requestId: randomUUID(),
          cardLimit: 125_000,
          currency: 'EUR',
          config: { expiryDuration: 12, tolerance: { percentage: 5 } },
          metadata: { card_name: 'Trip to Lisbon', booking: 'BK-2026-118734' },
        };
        await expectStatus(gw.post('/api/v1/issuing/cards', body, session.accessToken), 201, 'a card');
      });
    },
  },
  // Events (D63-D66): a phase that records E events (and their pending deliveries) through the
  // API or the connector listener, with `kind: 'event'`.
];

async function login(gw: Gateway): Promise<Session> {
  const body = await expectStatus(gw.post('/api/v1/auth/login', { username: 'travel-eu', password: PASSWORD }), 200, 'a login');
  return { accessToken: String(body['accessToken']), refreshToken: String(body['refreshToken']) };
}

async function refresh(gw: Gateway, session: Session): Promise<Session> {
  const body = await expectStatus(gw.post('/api/v1/auth/refresh', { refreshToken: session.refreshToken }, session.accessToken), 200, 'a refresh');
  return { accessToken: String(body['accessToken']), refreshToken: String(body['refreshToken']) };
}

/** The family key of a session's refresh token (refresh-token.ts: `<family>.<generation>.<secret>`). */
const familyKey = (session: Session): string => `${PREFIX}ses:{${session.refreshToken.split('.')[0]}}`;

/**
 * What production holds at once, per kind: cards live 24 h (a day's creations), a session as
 * long as its newest refresh token (24 h; each is counted at its size after a day of hourly
 * refreshes, which the probe shows is its size after one).
 */
const PROJECTION: { kind: KindName; alive: number; what: string }[] = [
  { kind: 'card', alive: 1_000_000, what: '1 M cards a day, kept 24 h' },
  { kind: 'session', alive: 100_000, what: '100 k sessions refreshed hourly' },
  // Events (D63-D66): { kind: 'event', alive: 7_000_000, what: '1 M events a day, kept 7 days' },
];

/** Issue 35's "done when". */
const TARGETS = {
  sessionGrowth: 1.1,
  cardRecordBytes: 500,
  projectedBytes: 600_000_000,
};

async function main(): Promise<void> {
  const port = await freePort();
  const server = await startLoopbackRedis(port, ['--maxmemory-policy', 'noeviction']);
  const redisUrl = `redis://127.0.0.1:${port}`;
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  const gw = await startGateway(redisUrl);
  const report: Record<string, unknown> = { date: new Date().toISOString(), redis: (await redis.info('server')).match(/^redis_version:(.*)$/m)?.[1]?.trim() };
  try {
    // Every script loaded and every limiter key of this minute made before the first reading.
    const sessionForCards = await refresh(gw, await login(gw));
    await PHASES[0]?.fill(gw, sessionForCards, 1);
    const before = await snapshot(redis);
    const perRecord: Partial<Record<KindName, { memoryUsage: number; usedMemory: number; count: number }>> = {};
    for (const phase of PHASES) {
      const start = await snapshot(redis);
      const started = performance.now();
      await phase.fill(gw, sessionForCards);
      const end = await snapshot(redis);
      perRecord[phase.kind] = {
        memoryUsage: end.kinds[phase.kind].bytes.mean,
        usedMemory: Math.round((end.usedMemory - start.usedMemory) / phase.count),
        count: phase.count,
      };
      console.info(`${phase.name}: ${phase.count} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    }

    // Sessions: S logins, each refreshed 24 times, the first K on to R; the family's MEMORY USAGE
    // read after the first refresh and the last.
    const beforeSessions = await snapshot(redis);
    const startedSessions = performance.now();
    const sessions: Session[] = [];
    for (let i = 0; i < SESSIONS; i += 1) sessions.push(await login(gw));
    const afterLogins = await snapshot(redis);
    const afterOne: number[] = [];
    const afterDay: number[] = [];
    const afterAll: number[] = [];
    const refreshUpTo = async (index: number, from: number, to: number) => {
      let session = sessions[index]!;
      for (let r = from; r <= to; r += 1) {
        session = await refresh(gw, session);
        if (r === 1) afterOne[index] = Number(await redis.memory('USAGE', familyKey(session)));
      }
      sessions[index] = session;
      return Number(await redis.memory('USAGE', familyKey(session)));
    };
    await inParallel(SESSIONS, async (index) => {
      afterDay[index] = await refreshUpTo(index, 1, DAILY_REFRESHES);
    });
    const afterDayOfRefreshes = await snapshot(redis);
    await inParallel(SAMPLE, async (index) => {
      afterAll[index] = await refreshUpTo(index, DAILY_REFRESHES + 1, REFRESHES);
    });
    const refreshed = SESSIONS * DAILY_REFRESHES + SAMPLE * Math.max(0, REFRESHES - DAILY_REFRESHES);
    console.info(`sessions: ${SESSIONS} logins and ${refreshed} refreshes in ${((performance.now() - startedSessions) / 1000).toFixed(1)} s`);
    const mean = (values: number[]) => Math.round(values.reduce((a, b) => a + b, 0) / values.length);
    perRecord.session = {
      memoryUsage: afterDayOfRefreshes.kinds.session.bytes.mean,
      usedMemory: Math.round((afterDayOfRefreshes.usedMemory - beforeSessions.usedMemory) / SESSIONS),
      count: SESSIONS,
    };
    const sample = afterOne.slice(0, SAMPLE);
    const sessionGrowth = {
      afterLogin: afterLogins.kinds.session.bytes.mean,
      afterOneRefresh: mean(afterOne),
      afterADayOfRefreshes: mean(afterDay),
      sampleAfterOneRefresh: mean(sample),
      [`sampleAfter${REFRESHES}Refreshes`]: mean(afterAll),
      // the session the cards were made with is one more family
      keysPerSession: (afterDayOfRefreshes.kinds.session.keys - 1) / SESSIONS,
      usedMemoryPerSessionAfterLogin: Math.round((afterLogins.usedMemory - beforeSessions.usedMemory) / SESSIONS),
      usedMemoryPerSessionAfterADay: perRecord.session.usedMemory,
    };
    const afterRefreshes = afterDayOfRefreshes;

    // The projection: bytes per record by used_memory (its share of Redis's tables included), or MEMORY USAGE if larger.
    const terms = PROJECTION.map(({ kind, alive, what }) => {
      const measured = perRecord[kind];
      const bytesPerRecord = measured ? Math.max(measured.usedMemory, measured.memoryUsage) : 0;
      return { kind, what, alive, bytesPerRecord, bytes: alive * bytesPerRecord };
    });
    const projectedBytes = terms.reduce((sum, term) => sum + term.bytes, 0);

    const checks = {
      [`a session after ${REFRESHES} refreshes within 10 % of after 1`]: mean(afterAll) <= mean(sample) * TARGETS.sessionGrowth,
      'a card record at most 500 B (MEMORY USAGE)': (perRecord.card?.memoryUsage ?? Infinity) <= TARGETS.cardRecordBytes,
      'the projection under 0.6 GB': projectedBytes < TARGETS.projectedBytes,
    };

    Object.assign(report, {
      fill: { cards: CARDS, sessions: SESSIONS, refreshesPerSession: DAILY_REFRESHES, sample: SAMPLE, refreshesPerSampleSession: REFRESHES },
      usedMemory: { before: before.usedMemory, after: afterRefreshes.usedMemory },
      kinds: afterRefreshes.kinds,
      perRecord,
      sessionGrowth,
      projection: { terms, totalBytes: projectedBytes, events: 'not measured yet (D63-D66)' },
      checks,
    });

    console.info('\nbytes per record (MEMORY USAGE of its keys; used_memory growth per record, tables included):');
    for (const [kind, measured] of Object.entries(perRecord))
      console.info(`  ${RECORD_KINDS[kind as KindName].name}: ${measured.memoryUsage} B; ${measured.usedMemory} B (${measured.count} records)`);
    console.info(
      `a session: ${sessionGrowth.afterLogin} B after login, ${sessionGrowth.afterOneRefresh} B after 1 refresh, ${sessionGrowth.afterADayOfRefreshes} B after ${DAILY_REFRESHES}; ` +
        `${SAMPLE} of them: ${sessionGrowth.sampleAfterOneRefresh} B after 1, ${mean(afterAll)} B after ${REFRESHES}; ${sessionGrowth.keysPerSession} key per session`,
    );
    console.info('\nprojection:');
    for (const term of terms) console.info(`  ${term.what}: ${term.alive} × ${term.bytesPerRecord} B = ${(term.bytes / 1e6).toFixed(1)} MB`);
    console.info(`  events: not measured yet (D63-D66)`);
    console.info(`  total: ${(projectedBytes / 1e9).toFixed(3)} GB`);
    console.info('\nissue 35 targets:');
    for (const [name, met] of Object.entries(checks)) console.info(`  ${met ? 'met    ' : 'MISSED '} ${name}`);
    writeFileSync(join(root, 'bench', 'scale-results.json'), `${JSON.stringify(report, null, 2)}\n`);
    console.info('\nwritten: bench/scale-results.json');
    if (Object.values(checks).includes(false)) process.exitCode = 1;
  } finally {
    await gw.close();
    redis.disconnect();
    await killRedisServer(server.child);
  }
}

await main();
