/**
 * The bench's parts and how they are started: the servers under test (bench/serve.ts, each in
 * its own process pinned to a core), the Node children (load generator, pairs, attacker), the
 * private Redis and Redis Cluster, their command counts, and the configuration every bench
 * gateway shares. Every process started here is owned (bench/own-processes.ts).
 */
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { cpus, setPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { stringify } from 'yaml';
import { EVENT_TYPES } from '../src/foundation/event-types.js';
import { hashPassword } from '../src/foundation/password-hash.js';
import { localhostCertificate } from '../tools/launch/certificate.js';
import { launch, type LaunchedProcess } from '../tools/launch/child-process.js';
import { freePort } from '../tools/launch/ports.js';
import { killRedisServer, startLoopbackRedis } from '../tools/launch/redis-server.js';
import { processCpuMicros } from './cpu-time.js';
import { ownProcess } from './own-processes.js';
import { BENCH_ACCOUNT } from './request-templates.js';

export const root = join(import.meta.dirname, '..', '..');
export const distBench = join(root, 'dist', 'bench');
export const PASSWORD = 'bench-password-not-secret';
/** Usernames the auth mix rotates over: at ~30 logins/s each is used about twice a minute. */
export const AUTH_USERS = 1000;
/** Body sizes of the hostile-body scenario: the default bodyLimit and the largest one allowed. */
export const HOSTILE_SIZES = [16 * 1024, 1024 * 1024];

export const pinning = (() => {
  try {
    execFileSync('taskset', ['-c', '0', 'true']);
    return cpus().length >= 2;
  } catch {
    return false;
  }
})();

/**
 * BENCH_NICE=-10 (root only): every process of the bench runs at that priority, so that on a
 * machine shared with other work the servers keep more of their core. Where the kernel groups
 * processes by session for scheduling (autogroup, /proc/sys/kernel/sched_autogroup_enabled), a
 * process's nice counts only against its own session: each bench process then starts a session
 * of its own (`setsid`) and the bench sets that session's nice (/proc/<pid>/autogroup). It makes
 * a busy machine less busy for the bench, not quiet: the A/A and the servers' share of their core
 * say how far that went. The attacker stays at 19.
 */
export const NICE = process.env['BENCH_NICE'] === undefined ? undefined : Number(process.env['BENCH_NICE']);

/** The words that pin a process to `cpu` (none where taskset is missing), in a session of its own at BENCH_NICE when set. */
export const pinnedTo = (cpu: number): string[] => [
  ...(NICE === undefined ? [] : ['setsid', 'nice', '-n', String(NICE)]),
  ...(pinning ? ['taskset', '-c', String(cpu)] : []),
];

/** Gives a process started with {@link pinnedTo} its priority: its session's, where the kernel groups by session. */
export function prioritise(pid: number, nice = NICE): void {
  if (nice === undefined || pid <= 0) return;
  try {
    setPriority(pid, nice);
    writeFileSync(`/proc/${pid}/autogroup`, String(nice));
  } catch {
    // No autogroup (or not root): the process's own nice is what there is.
  }
}

export interface Server {
  /** What it serves, for messages and the profile's file name. */
  name: string;
  process: LaunchedProcess;
  url: string;
  /** A gateway's connector listener (D64), where it has one. */
  connectorUrl: string | undefined;
  stats: { heapUsed: number; rss: number; handles: number }[];
  /**
   * User + system CPU time the server process has used so far, in microseconds: read from
   * /proc (bench/cpu-time.ts) at once, or asked of the process where /proc cannot say.
   */
  cpuMicros(): Promise<number>;
  /** Starts V8's sampling profiler in the server; `stopProfile` writes what it sampled to `file`. */
  startProfile(): Promise<void>;
  stopProfile(file: string): Promise<void>;
  /** Sends a command line that the role answers with `{"answer":...}` (the receiver's `receiver-stats`, `receiver-reset`). */
  ask<T>(command: string): Promise<T>;
  stop(): Promise<void>;
}

export async function startServer(name: string, cpu: number, args: string[], nodeFlags: string[] = [], benchDir = distBench): Promise<Server> {
  const server = ownProcess(
    launch(process.execPath, [...nodeFlags, join(benchDir, 'serve.js'), ...args], {
      prefix: pinnedTo(cpu),
      cwd: root,
      stdin: 'pipe',
      stderr: 'inherit',
    }),
  );
  prioritise(server.pid);
  const stats: Server['stats'] = [];
  const waiters: { cpu: ((micros: number) => void)[]; profiling: (() => void)[]; profile: (() => void)[]; answer: ((value: unknown) => void)[] } = {
    cpu: [],
    profiling: [],
    profile: [],
    answer: [],
  };
  server.onJsonLine((line) => {
    const message = line as { stats?: Server['stats'][number]; cpu?: { user: number; system: number }; profiling?: true; profile?: string; answer?: unknown };
    if (message.stats) stats.push(message.stats);
    if ('answer' in message) waiters.answer.shift()?.(message.answer);
    if (message.cpu) waiters.cpu.shift()?.(message.cpu.user + message.cpu.system);
    if (message.profiling) waiters.profiling.shift()?.();
    if (message.profile) waiters.profile.shift()?.();
  });
  const ready = await server.untilJsonLine((line) => line['ready'] === true && typeof line['url'] === 'string', {
    guardMs: 120_000,
    what: `server ${name} to say it is ready`,
  });
  const url = String(ready['url']);
  const ask = <T>(queue: ((value: T) => void)[], line: string) =>
    new Promise<T>((resolve) => {
      queue.push(resolve);
      server.child.stdin!.write(`${line}\n`);
    });
  return {
    name,
    process: server,
    url,
    connectorUrl: typeof ready['connector'] === 'string' ? ready['connector'] : undefined,
    stats,
    cpuMicros: async () => processCpuMicros(server.pid) ?? (await ask<number>(waiters.cpu, 'cpu')),
    startProfile: () => ask<void>(waiters.profiling, 'profile-start'),
    stopProfile: (file) => ask<void>(waiters.profile, `profile-stop ${file}`),
    ask: <T>(command: string) => ask<unknown>(waiters.answer, command) as Promise<T>,
    stop: async () => {
      await server.stop('SIGTERM');
    },
  };
}

/**
 * Runs a Node child of the bench (`load.js`, `pairs.js`, `attack.js`) on the load generator's
 * CPU and resolves with the JSON of its last stdout line. The attacker runs there too, at the
 * lowest priority (nice 19): it floods with whatever CPU the load generator and the upstream
 * leave, and can never take the load generator's core (on the server's core it would slow the
 * gateway by stealing its CPU, which no gateway defence can change, and a real attacker's CPU is
 * not the gateway's).
 */
export async function runChild<T>(script: 'load.js' | 'pairs.js' | 'attack.js', options: object, label: string): Promise<T> {
  const child = ownProcess(launch(process.execPath, [join(distBench, script), JSON.stringify(options)], { prefix: pinnedTo(1), stderr: 'inherit' }));
  // taskset execs node in the same process: the pid is the attacker's.
  if (script === 'attack.js' && child.pid > 0) {
    setPriority(child.pid, 19);
    prioritise(child.pid, NICE === undefined ? undefined : 19);
  } else prioritise(child.pid);
  // 'close' comes after stdout is drained: the last line is all there.
  await child.closed;
  const { code } = await child.exited;
  const last = child.stdout().trim().split('\n').pop();
  if (code !== 0 || !last) throw new Error(`${label} exited with ${code}`);
  return JSON.parse(last) as T;
}

export interface StoreCounts {
  commands: number;
  roundTrips: number;
}

/**
 * Calls of every command but INFO, and reads of commands from client sockets (round trips) but
 * those of INFO, from one `INFO commandstats stats`. Every INFO comes alone in its read: the
 * bench's own and the gateway's health check (one a second). Leaving them out makes a
 * difference of two counts exactly the gateway's other commands and reads between them (the
 * bench's INFO at the start is counted in the end's calls, its read in the start's reads).
 */
export async function storeCounts(redis: Redis): Promise<StoreCounts> {
  // Several sections in one INFO need Redis 7; before it, two calls (the second one's read is then counted too).
  const info = String(await redis.call('INFO', 'commandstats', 'stats').catch(async () => `${await redis.info('commandstats')}\n${await redis.info('stats')}`));
  let commands = 0;
  let infos = 0;
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (match[1] === 'info') infos += Number(match[2]);
    else if (!match[1]?.startsWith('config')) commands += Number(match[2]);
  }
  const reads = Number(/^total_reads_processed:(\d+)/m.exec(info)?.[1] ?? 0);
  return { commands, roundTrips: reads - infos };
}

export function httpsJson(url: string, path: string, body: object, ca: Buffer, headers: Record<string, string> = {}): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, url), { method: 'POST', ca, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString()));
      res.on('end', () =>
        res.statusCode === 200 ? resolve(JSON.parse(text) as Record<string, unknown>) : reject(new Error(`${path}: ${res.statusCode} ${text}`)),
      );
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

/** Creates `count` cards through a gateway, one after another; their ids, newest last. */
export async function seedCards(url: string, token: string, ca: Buffer, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) {
    const body = JSON.stringify({ requestId: randomUUID(), cardLimit: 125000, currency: 'EUR', metadata: { card_name: `Bench ${i}` } });
    const text = await new Promise<string>((resolve, reject) => {
      const headers = { 'content-type': 'application/json', authorization: `Bearer ${token}` };
      const req = request(new URL('/api/v1/issuing/cards', url), { method: 'POST', ca, headers }, (res) => {
        let answer = '';
        res.on('data', (chunk: Buffer) => (answer += chunk.toString()));
        res.on('end', () => (res.statusCode === 201 ? resolve(answer) : reject(new Error(`seeding a card: ${res.statusCode} ${answer}`))));
      });
      req.on('error', reject);
      req.end(body);
    });
    ids.push(String((JSON.parse(text) as Record<string, unknown>)['cardId']));
  }
  return ids;
}

/** Where the bench writes the secret the connector listener of the Redis gateway wants (`X-Connector-Secret`, D64). */
export const CONNECTOR_EVENTS_SECRET_FILE = 'connector-events.secret';
/** The bench account's webhook endpoint on the Redis gateway (the receiver role). */
export const BENCH_ENDPOINT = 'bench-receiver';
/**
 * BENCH_CARD_EVENTS_DELIVERED=1: the endpoint takes `card.created` too, so C on Redis delivers
 * each card's event while it is measured. By default it takes every other type: C on Redis then
 * records each card's event (in the card record's round trip) and delivers nothing, so its store
 * counts are the card's own; delivery is measured by the events scenario (I).
 */
export const CARD_EVENTS_DELIVERED = process.env['BENCH_CARD_EVENTS_DELIVERED'] === '1';
/** BENCH_EVENTS_IN_FLIGHT=n: the endpoint's `maxInFlight` (default: the config's, 4). */
export const EVENTS_IN_FLIGHT = process.env['BENCH_EVENTS_IN_FLIGHT'] === undefined ? undefined : Number(process.env['BENCH_EVENTS_IN_FLIGHT']);

export interface EventsSetup {
  /** The receiver role's URL: the bench account's webhook endpoint on the Redis gateway. */
  receiverUrl: string;
  /** The Redis of the gateway with events off: one of its own, so that each side of their comparison counts only its own commands. */
  eventsOffRedisUrl: string;
}

export async function prepare(dir: string, connectorUrl: string, redisUrl: string, clusterNodes: readonly string[], events: EventsSetup): Promise<void> {
  const pems = await localhostCertificate();
  writeFileSync(join(dir, 'tls.crt'), pems.cert);
  writeFileSync(join(dir, 'tls.key'), pems.key);
  writeFileSync(join(dir, 'signing.key'), generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }));
  writeFileSync(join(dir, 'card.key'), randomBytes(32).toString('base64'));
  writeFileSync(join(dir, CONNECTOR_EVENTS_SECRET_FILE), randomBytes(24).toString('base64url'));
  writeFileSync(join(dir, 'webhook.secret'), `whsec_${randomBytes(32).toString('base64')}`);
  // One hash serves every benchmark credential (same password): 1 + AUTH_USERS credentials,
  // so the auth mix can rotate usernames and stay within the real 5/min limits (D11).
  const passwordHash = await hashPassword(PASSWORD);
  const credential = (id: string, username: string) => ({
    id,
    username,
    passwordHash,
    issuingAccount: BENCH_ACCOUNT,
    permissions: ['cards:create', 'cards:reveal', 'cards:read'],
    addressRanges: [],
    active: true,
  });
  writeFileSync(
    join(dir, 'credentials.yaml'),
    stringify({ credentials: [credential('cred-bench', 'bench'), ...Array.from({ length: AUTH_USERS }, (_, i) => credential(`cred-auth-${i}`, `auth-${i}`))] }),
  );
  const stores = {
    memory: { kind: 'memory' },
    redis: { kind: 'redis', redis: { url: redisUrl, keyPrefix: 'bench:' } },
    'redis-events-off': { kind: 'redis', redis: { url: events.eventsOffRedisUrl, keyPrefix: 'bench:' } },
    cluster: { kind: 'redis', redis: { cluster: { nodes: clusterNodes }, keyPrefix: 'bench:' } },
  };
  // Events are on by default (no endpoint: recorded, delivered nowhere). The Redis gateway has the
  // connector listener and one endpoint for the bench account (the receiver); the events-off one none.
  const endpoint = {
    id: BENCH_ENDPOINT,
    issuingAccount: BENCH_ACCOUNT,
    url: events.receiverUrl,
    ...(!CARD_EVENTS_DELIVERED && { types: EVENT_TYPES.filter((type) => type !== 'card.created') }),
    secrets: [{ file: 'webhook.secret' }],
    ...(EVENTS_IN_FLIGHT !== undefined && { maxInFlight: EVENTS_IN_FLIGHT }),
  };
  for (const kind of ['memory', 'redis', 'redis-events-off', 'cluster', 'hostile'] as const) {
    const withEvents = kind === 'redis';
    const config = {
      environment: 'sandbox',
      listeners: {
        https: { host: '127.0.0.1', port: 0 },
        admin: { host: '127.0.0.1', port: 0 },
        ...(withEvents && { connector: { host: '127.0.0.1', port: 0 } }),
      },
      tls: { cert: { file: 'tls.crt' }, key: { file: 'tls.key' } },
      // 127.0.0.1 (the load generator) also stands for a load balancer: the auth mix sends
      // X-Forwarded-For from 10/8 to look like many clients. The attacker (127.0.0.2, .3) is not trusted.
      trustedProxies: ['127.0.0.1/32'],
      allowlist: ['127.0.0.0/8', '10.0.0.0/8'],
      store: stores[kind === 'hostile' ? 'memory' : kind],
      connector: {
        url: connectorUrl,
        timeoutMs: 5000,
        connections: 64,
        ...(withEvents && { eventsSecret: { file: CONNECTOR_EVENTS_SECRET_FILE } }),
      },
      tokens: { issuer: 'https://bench.invalid/', audience: 'card-issuing-bench', signingKey: { kid: 'bench-1', privateKey: { file: 'signing.key' } } },
      credentialsFile: 'credentials.yaml',
      issuingAccounts: { [BENCH_ACCOUNT]: { currencies: ['EUR'] } },
      cards: { encryptionKey: { kid: 'bench-1', key: { file: 'card.key' } }, ...(kind === 'hostile' && { bodyLimitBytes: HOSTILE_SIZES.at(-1) }) },
      audit: { file: `audit-${kind}.jsonl` },
      logging: { level: 'info' },
      // The per-address budgets (D53) stay at their defaults: the card load spreads its requests
      // over CLIENT_ADDRESSES forwarded addresses, and the attacker is held to its share. The
      // hostile-body scenario sends every body from one address: its limits must not answer for the reader.
      // The lifecycle scenarios read as fast as they can with one credential: its read limit must not answer for the gateway.
      rateLimits: {
        cardReads: { points: 100_000_000, windowSeconds: 60 },
        ...(kind === 'hostile' && { loginPerAddress: { points: 1_000_000, windowSeconds: 60 } }),
      },
      ...(kind === 'hostile' && {
        limits: { perAddress: { requestsPerSecond: 1_000_000, inFlight: 100_000, connectionsPerSecond: 100_000, connections: 100_000 } },
      }),
      ...(withEvents && { events: { endpoints: [endpoint] } }),
      ...(kind === 'redis-events-off' && { events: { enabled: false } }),
    };
    writeFileSync(join(dir, `gateway-${kind}.yaml`), stringify(config));
  }
}

/**
 * A private redis-server on `port`, owned by the bench. One that exits before it answers PING is
 * reported by the launcher; one whose launch fails here cannot be owned, and is killed by it.
 */
async function ownRedis(port: number, extraArgs: readonly string[] = []) {
  const started = await startLoopbackRedis(port, extraArgs);
  ownProcess(started.child);
  if (started.child.pid !== undefined && NICE !== undefined) setPriority(started.child.pid, NICE);
  return started;
}

/** Store commands across several nodes (a Cluster's masters): the sum of their INFO commandstats. */
export class NodeGroup {
  constructor(readonly clients: Redis[]) {}
  async count(): Promise<StoreCounts> {
    const total = { commands: 0, roundTrips: 0 };
    for (const client of this.clients) {
      const counts = await storeCounts(client);
      total.commands += counts.commands;
      total.roundTrips += counts.roundTrips;
    }
    return total;
  }
}

/**
 * A local Redis Cluster of three masters (no replicas: the two cores are for the gateway, and a
 * replica changes nothing for the gateway's own cost), formed with redis-cli.
 */
export async function startCluster(): Promise<{ nodes: string[]; group: NodeGroup; stop(): void }> {
  const dir = mkdtempSync(join(tmpdir(), 'gw-bench-cluster-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const ports = [await freePort(), await freePort(), await freePort()];
  const servers = await Promise.all(
    ports.map((port) => ownRedis(port, ['--cluster-enabled', 'yes', '--cluster-config-file', join(dir, `nodes-${port}.conf`), '--dir', dir])),
  );
  const clients = ports.map((port) => connectedClient(`redis://127.0.0.1:${port}`));
  await Promise.all(clients.map((client) => client.connect()));
  const nodes = ports.map((port) => `127.0.0.1:${port}`);
  execFileSync('redis-cli', ['--cluster', 'create', ...nodes, '--cluster-yes'], { stdio: 'ignore' });
  for (let attempt = 0; attempt < 100; attempt += 1) {
    const info = await clients[0]!.cluster('INFO');
    if (info.includes('cluster_state:ok')) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    nodes,
    group: new NodeGroup(clients),
    stop: () => {
      for (const client of clients) client.disconnect();
      for (const { child } of servers) void killRedisServer(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A redis-server of the benchmark's own: nothing else runs commands on it, so its counts are the gateway's. */
export async function startRedis(): Promise<{ url: string; client: Redis; stop(): void }> {
  const port = await freePort();
  const { child } = await ownRedis(port);
  const url = `redis://127.0.0.1:${port}`;
  const client = connectedClient(url);
  await client.connect();
  await client.ping();
  return {
    url,
    client,
    stop: () => {
      client.disconnect();
      void killRedisServer(child);
    },
  };
}

/** A connection for counting commands on a server that already answers PING (the launcher waited for it). */
function connectedClient(url: string): Redis {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => 50 });
  client.on('error', () => undefined);
  return client;
}
