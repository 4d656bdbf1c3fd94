/**
 * `npm run bench:scale [-- --cards N --sessions S --refreshes R --sample K --events E]`
 *
 * What the gateway's Redis holds at scale (issue 35). Starts a private redis-server, the sandbox
 * connector and a real gateway on it (HTTPS on loopback, in this process), then fills Redis
 * through the gateway's API, phase by phase: N cards (one idempotency record each, default
 * 10 000), S sessions (default 200) each refreshed 24 times (a day of hourly refreshes), K of
 * them (default 5) refreshed on to R refreshes in all (default 1 000). That gateway runs with
 * events off, so a card's figures are its record's alone. Then a second gateway on the same
 * Redis, events on with one webhook endpoint for the account, records E events (default 10 000),
 * a quarter of each kind: `card.created` (cards created through the API), `card.status_changed`
 * from the API (PATCH), and from the processor and `transaction.authorized`, both posted to the
 * connector listener as the connector would. The endpoint is a local sink that holds every
 * delivery unanswered, so each event's delivery stays pending and never attempted (but the few
 * in flight); at the end it answers 500, so that every delivery is attempted once and keeps a
 * retry state.
 *
 * After each phase it reads Redis: `INFO memory` (`used_memory` less client buffers, which
 * counts the keyspace's and the expiry table's share too) and `MEMORY USAGE ... SAMPLES 0` of
 * every key of each record kind. It prints bytes per record of each kind (per event kind: its
 * JSON, its dedupe key, its share of the account's log; a pending delivery: its share of the
 * endpoint's queue; a retry state: its field of the endpoint's state hash) and the projection
 * for a production load (PROJECTION, EVENTS_PROJECTION), checks the targets (TARGETS), writes
 * bench/scale-results.json, and exits 1 when a target is missed.
 */
import { generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Agent, request } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { stringify } from 'yaml';
import { composeGateway } from '../src/compose.js';
import { loadConfig } from '../src/config/load-config.js';
import {
  CONNECTOR_EVENTS_PATH,
  CONNECTOR_SECRET_HEADER,
  type ConnectorEvent,
  type ConnectorEventCardRecord,
} from '../src/connector/connector-events-contract.js';
import { SANDBOX_MERCHANT } from '../src/connector/sandbox/event-control-routes.js';
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
/** Events in all, a quarter of each kind (EVENT_KINDS). */
const EVENTS = option('events', 10_000);
/** Requests in flight at once while filling (cards, events; sessions refresh each one after another). */
const CONCURRENCY = 32;
const PREFIX = 'cig:production:';
const PASSWORD = 'scale-probe-password-not-secret';
const ACCOUNT = 'acct-travel-eu';
const ENDPOINT = 'partner-webhooks';
/** The base of the account's event keys (store/redis/event-scripts.ts). */
const EVENT_BASE = `${PREFIX}{ev:${ACCOUNT}}`;
/** Past the 128 entries a small sorted set or hash is kept as a list (listpack): the fills measure the layout of a large one. */
const WARM_UP_EVENTS = 150;
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
  event: { name: "an event's JSON", pattern: '{ev:*}e:*' },
  eventDedupe: { name: "an event's dedupe key (the connector's eventId, a card's creation)", pattern: '{ev:*}x:*' },
  eventLog: { name: "an account's event log", pattern: '{ev:*}log' },
  deliveryQueue: { name: "an endpoint's pending deliveries", pattern: '{ev:*}q:*' },
  deliveryState: { name: "an endpoint's delivery states (attempted at least once)", pattern: '{ev:*}s:*' },
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
      // SAMPLES 0: every element of a large sorted set or hash, not an estimate from five.
      for (const key of keys) pipeline.memory('USAGE', key, 'SAMPLES', '0');
      for (const [error, size] of (await pipeline.exec()) ?? []) if (!error) sizes.push(Number(size));
    } while (cursor !== '0');
    const total = sizes.reduce((a, b) => a + b, 0);
    const mean = sizes.length ? Math.round(total / sizes.length) : 0;
    kinds[kind] = { keys: sizes.length, bytes: { mean, min: sizes.length ? Math.min(...sizes) : 0, max: sizes.length ? Math.max(...sizes) : 0, total } };
  }
  return { usedMemory, kinds };
}

/** What the endpoint's sink does with a delivery: keep it unanswered (pending, in flight), or answer 500 (a retry). */
type SinkMode = 'hold' | 'fail';

/** The webhook endpoint: a local HTTP server that answers nothing until told to fail, and counts what it saw. */
async function startSink() {
  let mode: SinkMode = 'hold';
  const held: ServerResponse[] = [];
  const seen = new Set<string>();
  const fail = (response: ServerResponse) => response.writeHead(500, { 'content-type': 'text/plain' }).end('probe: not now');
  const server = createServer((incoming: IncomingMessage, response: ServerResponse) => {
    incoming.resume();
    incoming.on('end', () => {
      const id = incoming.headers['webhook-id'];
      if (typeof id === 'string') seen.add(id);
      if (mode === 'hold') held.push(response);
      else fail(response);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`,
    seen: () => seen.size,
    failFromNow() {
      mode = 'fail';
      for (const response of held.splice(0)) fail(response);
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const response of held.splice(0)) fail(response);
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

type Answer = { status: number; body: Record<string, unknown> };

/**
 * A gateway of its own on a private Redis, with limits raised so that only memory is measured.
 * With `sinkUrl`, events on: one endpoint for the account, delivering there, and the connector
 * listener; without, events off.
 */
async function startGateway(redisUrl: string, sinkUrl?: string) {
  const dir = mkdtempSync(join(tmpdir(), 'gw-scale-'));
  const connector = await startSandboxConnector({ host: '127.0.0.1', port: 0 });
  const pems = await localhostCertificate();
  writeFileSync(join(dir, 'tls.crt'), pems.cert);
  writeFileSync(join(dir, 'tls.key'), pems.key);
  writeFileSync(join(dir, 'signing.key'), generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }));
  writeFileSync(join(dir, 'card.key'), randomBytes(32).toString('base64'));
  const connectorSecret = randomBytes(24).toString('base64url');
  writeFileSync(join(dir, 'connector-events.secret'), connectorSecret);
  writeFileSync(join(dir, 'webhook.secret'), `whsec_${randomBytes(32).toString('base64')}`);
  const passwordHash = await hashPassword(PASSWORD);
  writeFileSync(
    join(dir, 'credentials.yaml'),
    stringify({
      credentials: [
        {
          id: 'cred-travel-eu',
          username: 'travel-eu',
          passwordHash,
          issuingAccount: ACCOUNT,
          permissions: ['cards:create', 'cards:reveal', 'cards:read', 'cards:update'],
          addressRanges: [],
          active: true,
        },
      ],
    }),
  );
  const many = { points: 100_000_000, windowSeconds: 60 };
  const events = sinkUrl
    ? {
        enabled: true,
        retentionDays: 7,
        // Often enough that the retry phase attempts every delivery within seconds.
        pollIntervalMs: 50,
        endpoints: [{ id: ENDPOINT, issuingAccount: ACCOUNT, url: sinkUrl, secrets: [{ file: 'webhook.secret' }], timeoutMs: 60_000, maxInFlight: 64 }],
      }
    : { enabled: false };
  writeFileSync(
    join(dir, 'gateway.yaml'),
    stringify({
      environment: 'sandbox',
      listeners: {
        https: { host: '127.0.0.1', port: 0 },
        admin: { host: '127.0.0.1', port: 0 },
        ...(sinkUrl && { connector: { host: '127.0.0.1', port: 0 } }),
      },
      tls: { cert: { file: 'tls.crt' }, key: { file: 'tls.key' } },
      trustedProxies: [],
      allowlist: ['127.0.0.0/8'],
      // A busy machine may hold Redis's answers past the default 300 ms: the probe measures memory, not time.
      store: { kind: 'redis', redis: { url: redisUrl, keyPrefix: PREFIX, commandTimeoutMs: 5000, connectTimeoutMs: 5000 } },
      connector: {
        url: connector.url,
        timeoutMs: 5000,
        connections: CONCURRENCY,
        ...(sinkUrl && { eventsSecret: { file: 'connector-events.secret' } }),
      },
      tokens: { issuer: 'https://scale.invalid/', audience: 'card-issuing-scale', signingKey: { kid: 'scale-1', privateKey: { file: 'signing.key' } } },
      credentialsFile: 'credentials.yaml',
      issuingAccounts: { [ACCOUNT]: { currencies: ['EUR'] } },
      cards: { encryptionKey: { kid: 'card-2026-01', key: { file: 'card.key' } } },
      audit: { file: 'audit.jsonl' },
      logging: { level: 'warn' },
      rateLimits: { login: many, loginPerAddress: many, refresh: many, cardReads: many, cardStatusChanges: many },
      limits: { perAddress: { requestsPerSecond: 1_000_000, inFlight: 100_000, connectionsPerSecond: 100_000 } },
      events,
    }),
  );
  const config = await loadConfig(join(dir, 'gateway.yaml'), {});
  const composed = await composeGateway(config, { logTo: join(dir, 'gateway.log') });
  const running = await listenGateway(composed.gateway, config.listeners);
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY, ca: pems.cert });
  const sendOnce = (origin: string, method: 'POST' | 'PATCH', path: string, body: unknown, headers: Record<string, string>): Promise<Answer> =>
    new Promise((resolve, reject) => {
      const req = request(new URL(path, origin), { method, agent, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> }));
      });
      req.on('error', reject);
      req.end(JSON.stringify(body));
    });
  // A kept-alive socket the server closed while it was idle (between phases) resets the next
  // request on it: sent once more on a new one. Every request of the probe is safe to repeat
  // (a requestId, a target status, an eventId).
  const send: typeof sendOnce = (...request) =>
    sendOnce(...request).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ECONNRESET') throw error;
      return sendOnce(...request);
    });
  const bearer = (token?: string): Record<string, string> => (token ? { authorization: `Bearer ${token}` } : {});
  return {
    post: (path: string, body: unknown, token?: string) => send(running.httpsUrl, 'POST', path, body, bearer(token)),
    patch: (path: string, body: unknown, token: string) => send(running.httpsUrl, 'PATCH', path, body, bearer(token)),
    /** `POST /v1/events` on the connector listener, as the connector posts a processor-side event. */
    postEvent(event: ConnectorEvent): Promise<Answer> {
      if (!running.connectorUrl) throw new Error('events are off on this gateway');
      return send(running.connectorUrl, 'POST', CONNECTOR_EVENTS_PATH, event, { [CONNECTOR_SECRET_HEADER]: connectorSecret });
    },
    /** The card as the connector holds it (`GET /v1/cards/{cardId}`): what a processor-side event carries. */
    async connectorCard(cardId: string): Promise<ConnectorEventCardRecord> {
      const response = await fetch(new URL(`/v1/cards/${encodeURIComponent(cardId)}?issuingAccount=${ACCOUNT}`, connector.url));
      if (response.status !== 200) throw new Error(`the connector's card ${cardId}: ${response.status}`);
      return (await response.json()) as ConnectorEventCardRecord;
    },
    async close() {
      agent.destroy();
      await running.close();
      await composed.close();
      await connector.close();
    },
  };
}

type Gateway = Awaited<ReturnType<typeof startGateway>>;

async function expectStatus(answer: Promise<Answer>, status: number, what: string) {
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

/** A card as the cards phase and the card.created events make it; its id. */
async function createCard(gw: Gateway, session: Session): Promise<string> {
  const body = {
    requestId: randomUUID(),
    cardLimit: 125_000,
    currency: 'EUR',
    config: { expiryDuration: 12, tolerance: { percentage: 5 } },
    metadata: { card_name: 'Trip to Lisbon', booking: 'BK-2026-118734' },
  };
  return String((await expectStatus(gw.post('/api/v1/issuing/cards', body, session.accessToken), 201, 'a card'))['cardId']);
}

/** An event id as a processor would send it (the sandbox connector's shape). */
const processorEventId = (): string => `sbx_evt_${randomBytes(12).toString('hex')}`;

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
 * The kinds of event, each filled through the way it comes in production, on `cards` (the cards
 * made by the first fill, in order: each later kind changes them further).
 */
const EVENT_KINDS = [
  {
    name: 'card.created',
    source: 'api: POST /api/v1/issuing/cards',
    async fill(gw: Gateway, session: Session, cards: string[], count: number) {
      const made: string[] = [];
      await inParallel(count, async () => {
        made.push(await createCard(gw, session));
      });
      cards.push(...made);
    },
  },
  {
    name: 'card.status_changed (api)',
    source: 'api: PATCH /api/v1/issuing/cards/{cardId}',
    async fill(gw: Gateway, session: Session, cards: string[], count: number, offset: number) {
      await inParallel(count, async (index) => {
        const cardId = cards[offset + index]!;
        const body = { status: 'inactive', reason: 'Frozen by the traveller' };
        await expectStatus(gw.patch(`/api/v1/issuing/cards/${cardId}`, body, session.accessToken), 200, 'a status change');
      });
    },
  },
  {
    name: 'card.status_changed (processor)',
    source: 'processor: POST /v1/events on the connector listener',
    async fill(gw: Gateway, _session: Session, cards: string[], count: number, offset: number) {
      await inParallel(count, async (index) => {
        const card = await gw.connectorCard(cards[offset + index]!);
        const event: ConnectorEvent = {
          eventId: processorEventId(),
          type: 'card.status_changed',
          occurredAt: new Date().toISOString(),
          issuingAccount: ACCOUNT,
          data: { card: { ...card, status: 'canceled' }, previousStatus: card.status, status: 'canceled', reason: 'Card expired' },
        };
        await expectStatus(gw.postEvent(event), 202, 'a processor status change');
      });
    },
  },
  {
    name: 'transaction.authorized',
    source: 'processor: POST /v1/events on the connector listener',
    async fill(gw: Gateway, _session: Session, cards: string[], count: number, offset: number) {
      await inParallel(count, async (index) => {
        const event: ConnectorEvent = {
          eventId: processorEventId(),
          type: 'transaction.authorized',
          occurredAt: new Date().toISOString(),
          issuingAccount: ACCOUNT,
          data: {
            transactionId: `txn_${randomBytes(12).toString('hex')}`,
            cardId: cards[(offset + index) % cards.length]!,
            amount: 18_450,
            currency: 'EUR',
            merchant: SANDBOX_MERCHANT,
          },
        };
        await expectStatus(gw.postEvent(event), 202, 'a transaction');
      });
    },
  },
] as const;
type EventKindName = (typeof EVENT_KINDS)[number]['name'];

/**
 * An event kind's bytes per event. Its JSON and its dedupe key are its own; an entry of the log or
 * of a queue is the same for every kind (a sequence or a due instant, and an event id), so their
 * shares are taken over every event recorded, where the tables' power-of-two steps average out.
 */
interface EventFigures {
  source: string;
  count: number;
  /** MEMORY USAGE of its JSON's key. */
  eventKey: number;
  /** Its dedupe key's (0 for a kind without one), per event. */
  dedupeKey: number;
  /** Its share of the account's log (a sorted set): the log's growth per event, over every event. */
  logShare: number;
  /** The three above: what issue 35's 1 KiB bounds. */
  memoryUsage: number;
  /** `memoryUsage` and its share of Redis's own tables (keyspace, expiry): what it adds to `used_memory`. */
  usedMemory: number;
  /** `used_memory` growth per event over this kind's fill alone, its delivery included: steps with the tables' growth. */
  usedMemoryOfItsFill: number;
}

/** What production holds at once, per kind: cards live 24 h (a day's creations), a session as long as its newest refresh token (24 h). */
const PROJECTION: { kind: KindName; alive: number; what: string }[] = [
  { kind: 'card', alive: 1_000_000, what: '1 M cards a day, kept 24 h' },
  { kind: 'session', alive: 100_000, what: '100 k sessions refreshed hourly' },
];
/** Events beside it (issue 35): a million a day kept for the default retention (7 days). */
const EVENTS_PROJECTION = { alive: 7_000_000, what: '1 M events a day, kept 7 days' };
/** And a backlog: an endpoint down for a day holds a day of events as pending deliveries, each attempted. */
const BACKLOG_PROJECTION = { alive: 1_000_000, what: 'an endpoint down for a day: 1 M pending deliveries, each with its retry state' };

/** Issue 35's "done when". */
const TARGETS = {
  sessionGrowth: 1.1,
  cardRecordBytes: 500,
  projectedBytes: 600_000_000,
  eventBytes: 1024,
  pendingDeliveryBytes: 200,
};

const delta = (start: Snapshot, end: Snapshot, kind: KindName) => ({
  keys: end.kinds[kind].keys - start.kinds[kind].keys,
  bytes: end.kinds[kind].bytes.total - start.kinds[kind].bytes.total,
});

async function until(what: string, guardMs: number, done: () => Promise<boolean>): Promise<void> {
  const deadline = performance.now() + guardMs;
  while (!(await done())) {
    if (performance.now() > deadline) throw new Error(`${what}: not within ${guardMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

async function main(): Promise<void> {
  const port = await freePort();
  const server = await startLoopbackRedis(port, ['--maxmemory-policy', 'noeviction']);
  const redisUrl = `redis://127.0.0.1:${port}`;
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  const sink = await startSink();
  let gw = await startGateway(redisUrl);
  const report: Record<string, unknown> = { date: new Date().toISOString(), redis: (await redis.info('server')).match(/^redis_version:(.*)$/m)?.[1]?.trim() };
  try {
    // Every script loaded and every limiter key of this minute made before the first reading.
    const sessionForCards = await refresh(gw, await login(gw));
    await createCard(gw, sessionForCards);
    const before = await snapshot(redis);
    const perRecord: Partial<Record<KindName, { memoryUsage: number; usedMemory: number; count: number }>> = {};
    {
      const start = await snapshot(redis);
      const started = performance.now();
      await inParallel(CARDS, async () => {
        await createCard(gw, sessionForCards);
      });
      const end = await snapshot(redis);
      perRecord.card = { memoryUsage: end.kinds.card.bytes.mean, usedMemory: Math.round((end.usedMemory - start.usedMemory) / CARDS), count: CARDS };
      console.info(`cards: ${CARDS} in ${((performance.now() - started) / 1000).toFixed(1)} s (events off)`);
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

    // Events: a gateway with events on and one endpoint, on the same Redis; its sink holds every delivery.
    await gw.close();
    gw = await startGateway(redisUrl, sink.url);
    const eventSession = await login(gw);
    const cards: string[] = [];
    // Scripts loaded, the account's log and the endpoint's queue past their small (listpack) size.
    await EVENT_KINDS[0].fill(gw, eventSession, cards, 1);
    await EVENT_KINDS[3].fill(gw, eventSession, cards, WARM_UP_EVENTS, 0);
    cards.length = 0;
    const perKind = Math.ceil(EVENTS / EVENT_KINDS.length);
    const sequence = async () => Number(await redis.get(`${EVENT_BASE}seq`));
    const fills: { kind: (typeof EVENT_KINDS)[number]; count: number; eventKey: number; dedupeKey: number; usedMemoryOfItsFill: number }[] = [];
    const beforeEvents = await snapshot(redis);
    let cardsMade = 0;
    for (const kind of EVENT_KINDS) {
      const start = await snapshot(redis);
      const firstSequence = await sequence();
      const started = performance.now();
      await kind.fill(gw, eventSession, cards, perKind, 0);
      const end = await snapshot(redis);
      const count = (await sequence()) - firstSequence;
      if (count !== perKind) throw new Error(`${kind.name}: ${count} events recorded for ${perKind} requests`);
      const json = delta(start, end, 'event');
      // A card.created fill also makes the cards: their records are the cards phase's figure.
      const made = delta(start, end, 'card').keys;
      cardsMade += made;
      fills.push({
        kind,
        count,
        eventKey: Math.round(json.bytes / json.keys),
        dedupeKey: Math.round(delta(start, end, 'eventDedupe').bytes / count),
        usedMemoryOfItsFill: Math.round((end.usedMemory - start.usedMemory - made * perRecord.card.usedMemory) / count),
      });
      console.info(`${kind.name}: ${count} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    }
    const afterEvents = await snapshot(redis);
    const recorded = fills.reduce((sum, fill) => sum + fill.count, 0);
    const logShare = Math.round(delta(beforeEvents, afterEvents, 'eventLog').bytes / recorded);
    const pendingDelivery = Math.round(delta(beforeEvents, afterEvents, 'deliveryQueue').bytes / recorded);
    const keysOfEvents = (['event', 'eventDedupe', 'eventLog', 'deliveryQueue', 'deliveryState'] as const).reduce(
      (sum, kind) => sum + delta(beforeEvents, afterEvents, kind).bytes,
      0,
    );
    // What the events and their deliveries added to used_memory beyond MEMORY USAGE of their keys: Redis's tables.
    const eventsUsedMemory = afterEvents.usedMemory - beforeEvents.usedMemory - cardsMade * perRecord.card.usedMemory;
    const tablesShare = Math.max(0, Math.round((eventsUsedMemory - keysOfEvents) / recorded));
    const events = Object.fromEntries(
      fills.map(({ kind, count, eventKey, dedupeKey, usedMemoryOfItsFill }) => {
        const memoryUsage = eventKey + dedupeKey + logShare;
        return [
          kind.name,
          {
            source: kind.source,
            count,
            eventKey,
            dedupeKey,
            logShare,
            memoryUsage,
            usedMemory: memoryUsage + tablesShare,
            usedMemoryOfItsFill,
          } satisfies EventFigures,
        ];
      }),
    ) as Record<EventKindName, EventFigures>;
    const eventsOverall = {
      events: recorded,
      usedMemoryPerEventWithItsDelivery: Math.round(eventsUsedMemory / recorded),
      memoryUsagePerEventWithItsDelivery: Math.round(keysOfEvents / recorded),
      tablesSharePerEvent: tablesShare,
      pendingDelivery,
    };

    // Retries: the sink answers 500 from now on; each delivery is attempted and keeps its state.
    const pending = Number(await redis.zcard(`${EVENT_BASE}q:${ENDPOINT}`));
    const stateKey = `${EVENT_BASE}s:${ENDPOINT}`;
    // The few deliveries in flight to the holding sink have their state already.
    const statesBefore = Number(await redis.hlen(stateKey));
    const startedRetries = performance.now();
    sink.failFromNow();
    await until('every pending delivery attempted once', 300_000, async () => sink.seen() >= pending && Number(await redis.hlen(stateKey)) >= pending);
    const afterRetries = await snapshot(redis);
    const states = Number(await redis.hlen(stateKey));
    const retry = {
      pendingDeliveries: pending,
      deliveries: states,
      memoryUsage: Math.round(afterRetries.kinds.deliveryState.bytes.total / states),
      usedMemory: Math.round((afterRetries.usedMemory - afterEvents.usedMemory) / Math.max(1, states - statesBefore)),
    };
    console.info(`retries: ${states} deliveries attempted in ${((performance.now() - startedRetries) / 1000).toFixed(1)} s`);

    // The projection: bytes per record by used_memory (its share of Redis's tables included), or MEMORY USAGE if larger.
    const terms = PROJECTION.map(({ kind, alive, what }) => {
      const measured = perRecord[kind];
      const bytesPerRecord = measured ? Math.max(measured.usedMemory, measured.memoryUsage) : 0;
      return { kind, what, alive, bytesPerRecord, bytes: alive * bytesPerRecord };
    });
    const projectedBytes = terms.reduce((sum, term) => sum + term.bytes, 0);
    const eventFigures = Object.entries(events) as [EventKindName, EventFigures][];
    // The largest kind, as if every event were one: the projection errs on the safe side.
    const largest = eventFigures.reduce((a, b) => (b[1].usedMemory > a[1].usedMemory ? b : a));
    const perEvent = largest[1].usedMemory;
    const perPending = pendingDelivery + Math.max(retry.memoryUsage, retry.usedMemory);
    const eventsTerm = { ...EVENTS_PROJECTION, kind: largest[0], bytesPerEvent: perEvent, bytes: EVENTS_PROJECTION.alive * perEvent };
    const backlogTerm = { ...BACKLOG_PROJECTION, bytesPerDelivery: perPending, bytes: BACKLOG_PROJECTION.alive * perPending };

    const checks: Record<string, boolean> = {
      [`a session after ${REFRESHES} refreshes within 10 % of after 1`]: mean(afterAll) <= mean(sample) * TARGETS.sessionGrowth,
      'a card record at most 500 B (MEMORY USAGE)': (perRecord.card.memoryUsage ?? Infinity) <= TARGETS.cardRecordBytes,
      'the projection of cards and sessions under 0.6 GB': projectedBytes < TARGETS.projectedBytes,
    };
    for (const [name, figures] of eventFigures) {
      checks[`a ${name} event at most 1 KiB (MEMORY USAGE of its keys and its share of the log)`] = figures.memoryUsage <= TARGETS.eventBytes;
    }
    checks['a pending delivery at most 200 B (its share of the queue)'] = pendingDelivery <= TARGETS.pendingDeliveryBytes;

    Object.assign(report, {
      fill: {
        cards: CARDS,
        sessions: SESSIONS,
        refreshesPerSession: DAILY_REFRESHES,
        sample: SAMPLE,
        refreshesPerSampleSession: REFRESHES,
        events: perKind * EVENT_KINDS.length,
        eventsPerKind: perKind,
      },
      usedMemory: {
        before: before.usedMemory,
        afterSessions: afterDayOfRefreshes.usedMemory,
        beforeEvents: beforeEvents.usedMemory,
        afterEvents: afterEvents.usedMemory,
        afterRetries: afterRetries.usedMemory,
      },
      kinds: afterRetries.kinds,
      perRecord,
      sessionGrowth,
      events,
      eventsOverall,
      retry,
      projection: {
        terms,
        totalBytes: projectedBytes,
        events: eventsTerm,
        endpointDownForADay: backlogTerm,
        totalWithEventsBytes: projectedBytes + eventsTerm.bytes,
      },
      checks,
    });

    console.info('\nbytes per record (MEMORY USAGE of its keys; used_memory growth per record, tables included):');
    for (const [kind, measured] of Object.entries(perRecord))
      console.info(`  ${RECORD_KINDS[kind as KindName].name}: ${measured.memoryUsage} B; ${measured.usedMemory} B (${measured.count} records)`);
    console.info(
      `a session: ${sessionGrowth.afterLogin} B after login, ${sessionGrowth.afterOneRefresh} B after 1 refresh, ${sessionGrowth.afterADayOfRefreshes} B after ${DAILY_REFRESHES}; ` +
        `${SAMPLE} of them: ${sessionGrowth.sampleAfterOneRefresh} B after 1, ${mean(afterAll)} B after ${REFRESHES}; ${sessionGrowth.keysPerSession} key per session`,
    );
    console.info(
      `\nbytes per event (MEMORY USAGE: its JSON + its dedupe key + its share of the log = the event; with Redis's tables' share, ${tablesShare} B an event, what it adds to used_memory):`,
    );
    for (const [name, f] of eventFigures)
      console.info(`  ${name} (${f.count}, ${f.source}): ${f.eventKey} + ${f.dedupeKey} + ${f.logShare} = ${f.memoryUsage} B; ${f.usedMemory} B`);
    console.info(`  a pending delivery (its share of the endpoint's queue): ${pendingDelivery} B`);
    console.info(
      `  over all ${recorded} events, each with its pending delivery: ${eventsOverall.memoryUsagePerEventWithItsDelivery} B of MEMORY USAGE, ${eventsOverall.usedMemoryPerEventWithItsDelivery} B of used_memory`,
    );
    console.info(
      `  a retry state (a delivery attempted once, answered 500): ${retry.memoryUsage} B; used_memory ${retry.usedMemory} B (${retry.deliveries} deliveries)`,
    );
    console.info('\nprojection:');
    for (const term of terms) console.info(`  ${term.what}: ${term.alive} × ${term.bytesPerRecord} B = ${(term.bytes / 1e6).toFixed(1)} MB`);
    console.info(`  cards and sessions: ${(projectedBytes / 1e9).toFixed(3)} GB`);
    console.info(
      `  ${eventsTerm.what}: ${eventsTerm.alive} × ${eventsTerm.bytesPerEvent} B (${eventsTerm.kind}, the largest) = ${(eventsTerm.bytes / 1e9).toFixed(3)} GB`,
    );
    console.info(`  with events: ${((projectedBytes + eventsTerm.bytes) / 1e9).toFixed(3)} GB`);
    console.info(`  beside it, ${backlogTerm.what}: ${backlogTerm.alive} × ${backlogTerm.bytesPerDelivery} B = ${(backlogTerm.bytes / 1e6).toFixed(1)} MB`);
    console.info('\nissue 35 targets:');
    for (const [name, met] of Object.entries(checks)) console.info(`  ${met ? 'met    ' : 'MISSED '} ${name}`);
    writeFileSync(join(root, 'bench', 'scale-results.json'), `${JSON.stringify(report, null, 2)}\n`);
    console.info('\nwritten: bench/scale-results.json');
    if (Object.values(checks).includes(false)) process.exitCode = 1;
  } finally {
    sink.failFromNow();
    await gw.close();
    await sink.close();
    redis.disconnect();
    await killRedisServer(server.child);
  }
}

await main();
