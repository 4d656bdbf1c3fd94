/**
 * `npm run bench [-- --quick | --soak | --profile | --no-request-log]`
 *
 * Starts everything on loopback (sandbox connectors, a bare proxy, gateways on the memory and
 * the Redis store), drives each scenario with autocannon from a separate process, and prints a
 * table and bench/results.json. The server under test is pinned to CPU 0 and the load
 * generator (and the upstream connector) to CPU 1 with taskset where it exists; Redis is the
 * machine's and is not pinned.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import selfsigned from 'selfsigned';
import { stringify } from 'yaml';
import { hashPassword } from '../src/auth/password-hash.js';
import type { LoadOptions } from './load.js';

const argv = new Set(process.argv.slice(2));
const QUICK = argv.has('--quick');
const SOAK = argv.has('--soak');
const PROFILE = argv.has('--profile');
const LOG_REQUESTS = !argv.has('--no-request-log');
const RUNS = Number(process.env['BENCH_RUNS'] ?? (QUICK ? 1 : 3));
const DURATION = Number(process.env['BENCH_DURATION'] ?? (QUICK ? 3 : 8));
const WARMUP = QUICK ? 2 : 3;
const CONNECTIONS = Number(process.env['BENCH_CONNECTIONS'] ?? 32);
const MODERATE_RATE = Number(process.env['BENCH_RATE'] ?? 500);
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const root = join(import.meta.dirname, '..', '..');
const distBench = join(root, 'dist', 'bench');
const PASSWORD = 'bench-password-not-secret';
/** Usernames the auth mix rotates over: at ~30 logins/s each is used about twice a minute. */
const AUTH_USERS = 1000;

const pinning = (() => {
  try {
    execFileSync('taskset', ['-c', '0', 'true']);
    return cpus().length >= 2;
  } catch {
    return false;
  }
})();

function pinned(cpu: number, args: string[]): [string, string[]] {
  return pinning ? ['taskset', ['-c', String(cpu), process.execPath, ...args]] : [process.execPath, args];
}

interface Server {
  child: ChildProcess;
  url: string;
  stats: { heapUsed: number; rss: number; handles: number }[];
  /** User + system CPU time the server process has used so far, in microseconds. */
  cpuMicros(): Promise<number>;
  stop(): Promise<void>;
}

async function startServer(cpu: number, args: string[], nodeFlags: string[] = []): Promise<Server> {
  const [command, commandArgs] = pinned(cpu, [...nodeFlags, join(distBench, 'serve.js'), ...args]);
  const child = spawn(command, commandArgs, { stdio: ['pipe', 'pipe', 'inherit'], cwd: root });
  const stats: Server['stats'] = [];
  const cpuWaiters: ((micros: number) => void)[] = [];
  const url = await new Promise<string>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`server ${args[0]} exited with ${code}`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const message = JSON.parse(line) as { ready?: boolean; url?: string; stats?: Server['stats'][number]; cpu?: { user: number; system: number } };
      if (message.ready && message.url) resolve(message.url);
      if (message.stats) stats.push(message.stats);
      if (message.cpu) cpuWaiters.shift()?.(message.cpu.user + message.cpu.system);
    });
  });
  return {
    child,
    url,
    stats,
    cpuMicros: () =>
      new Promise((resolve) => {
        cpuWaiters.push(resolve);
        child.stdin!.write('cpu\n');
      }),
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

interface LoadResult {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  p999Ms: number;
  requests: number;
  non2xx: number;
  errors: number;
  timeouts: number;
}

function runLoad(options: LoadOptions): Promise<LoadResult> {
  const [command, args] = pinned(1, [join(distBench, 'load.js'), JSON.stringify(options)]);
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('exit', (code) => {
      const last = output.trim().split('\n').pop();
      if (code !== 0 || !last) return reject(new Error(`load generator exited with ${code}`));
      resolve(JSON.parse(last) as LoadResult);
    });
  });
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

interface Measured {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  p999Ms: number;
  /** CPU time of the server under test per answered request: steadier than req/s on a noisy VM. */
  cpuUsPerRequest: number;
  non2xx: number;
  errors: number;
}

type Load = Omit<LoadOptions, 'connections' | 'durationSeconds' | 'overallRate'>;
type RunResult = LoadResult & { cpuUs: number };

async function runOnce(server: Server, load: Load, connections: number, overallRate: number | undefined, seconds: number): Promise<RunResult> {
  const before = await server.cpuMicros();
  const result = await runLoad({ ...load, connections, durationSeconds: seconds, ...(overallRate && { overallRate }) });
  return { ...result, cpuUs: ((await server.cpuMicros()) - before) / Math.max(1, result.requests) };
}

function summarise(results: RunResult[]): Measured {
  return {
    rps: Math.round(median(results.map((r) => r.rps))),
    p50Ms: median(results.map((r) => r.p50Ms)),
    p99Ms: median(results.map((r) => r.p99Ms)),
    p999Ms: median(results.map((r) => r.p999Ms)),
    cpuUsPerRequest: Math.round(median(results.map((r) => r.cpuUs))),
    non2xx: results.reduce((sum, r) => sum + r.non2xx, 0),
    errors: results.reduce((sum, r) => sum + r.errors + r.timeouts, 0),
  };
}

function httpsJson(url: string, path: string, body: object, ca: Buffer): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, url), { method: 'POST', ca, headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString()));
      res.on('end', () => (res.statusCode === 200 ? resolve(JSON.parse(text) as Record<string, unknown>) : reject(new Error(`${path}: ${res.statusCode} ${text}`))));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

async function prepare(dir: string, connectorUrl: string, redisPrefix: string): Promise<void> {
  const pems = await selfsigned.generate([{ name: 'commonName', value: 'localhost' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    extensions: [{ name: 'subjectAltName', altNames: [{ type: 2, value: 'localhost' }, { type: 7, ip: '127.0.0.1' }] }],
  });
  writeFileSync(join(dir, 'tls.crt'), pems.cert);
  writeFileSync(join(dir, 'tls.key'), pems.private);
  writeFileSync(join(dir, 'signing.key'), generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }));
  writeFileSync(join(dir, 'card.key'), randomBytes(32).toString('base64'));
  // One hash serves every benchmark credential (same password): 1 + AUTH_USERS credentials,
  // so the auth mix can rotate usernames and stay within the real 5/min limits (D11).
  const passwordHash = await hashPassword(PASSWORD);
  const credential = (id: string, username: string) => ({ id, username, passwordHash, issuingAccount: 'acct-bench-eu', permissions: ['cards:create', 'cards:reveal'], addressRanges: [], active: true });
  writeFileSync(
    join(dir, 'credentials.yaml'),
    stringify({ credentials: [credential('cred-bench', 'bench'), ...Array.from({ length: AUTH_USERS }, (_, i) => credential(`cred-auth-${i}`, `auth-${i}`))] }),
  );
  for (const kind of ['memory', 'redis'] as const) {
    const config = {
      environment: 'sandbox',
      listeners: { https: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 } },
      tls: { cert: { file: 'tls.crt' }, key: { file: 'tls.key' } },
      allowlist: ['127.0.0.0/8'],
      store: kind === 'memory' ? { kind } : { kind, redis: { url: REDIS_URL, keyPrefix: redisPrefix } },
      connector: { url: connectorUrl, timeoutMs: 5000, connections: 64 },
      tokens: { issuer: 'https://bench.invalid/', audience: 'card-issuing-bench', signingKey: { kid: 'bench-1', privateKey: { file: 'signing.key' } } },
      credentialsFile: 'credentials.yaml',
      issuingAccounts: { 'acct-bench-eu': { currencies: ['EUR'] } },
      cards: { encryptionKey: { file: 'card.key' } },
      audit: { file: `audit-${kind}.jsonl` },
      logging: { level: 'info' },
    };
    writeFileSync(join(dir, `gateway-${kind}.yaml`), stringify(config));
  }
}

async function deletePrefix(prefix: string): Promise<void> {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
  redis.disconnect();
}

interface ScenarioResult extends Measured {
  name: string;
  description: string;
  ratioToBareProxy: number;
  atModerateRate: Measured & { rate: number; p99AddedMsVsBareProxy: number };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'gw-bench-'));
  const redisPrefix = `bench:${process.pid}:`;
  const servers: Server[] = [];
  const started = async (cpu: number, args: string[], flags: string[] = []) => {
    const server = await startServer(cpu, args, flags);
    servers.push(server);
    return server;
  };
  try {
    // Upstream for B-F shares CPU 1 with the load generator; A gets its own on CPU 0.
    const upstream = await started(1, ['connector']);
    await prepare(dir, upstream.url, redisPrefix);
    const ca = readFileSync(join(dir, 'tls.crt'));
    const profileFlags = (name: string) => (PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${join(root, 'bench', 'profiles')}`, `--cpu-prof-name=${name}.cpuprofile`] : []);
    if (PROFILE) mkdirSync(join(root, 'bench', 'profiles'), { recursive: true });

    if (SOAK) return await soak(started, dir, ca);

    // Every server is up at once (all idle but the one under load), and the scenarios take
    // turns run by run: a slow spell of a shared VM then hits every scenario alike instead of
    // deciding the ratios.
    const direct = await started(0, ['connector']);
    const bare = await started(0, ['bare-proxy', upstream.url, dir], profileFlags('bare-proxy'));
    const gateways = {
      memory: await started(0, ['gateway', 'memory', dir, String(LOG_REQUESTS)], profileFlags('gateway-memory')),
      redis: await started(0, ['gateway', 'redis', dir, String(LOG_REQUESTS)], profileFlags('gateway-redis')),
    };
    const token = async (server: Server) => String((await httpsJson(server.url, '/api/v1/auth/login', { username: 'bench', password: PASSWORD }, ca))['accessToken']);
    const tokens = { memory: await token(gateways.memory), redis: await token(gateways.redis) };
    const standard = { connections: CONNECTIONS, rate: MODERATE_RATE };
    const scenarios: { name: string; description: string; server: Server; load: Load; shape: { connections: number; rate: number } }[] = [
      { name: 'A-connector-direct', description: 'sandbox connector called directly (plain HTTP)', server: direct, load: { url: `${direct.url}/v1/cards`, scenario: 'connector-create' }, shape: standard },
      { name: 'B-bare-proxy', description: 'Fastify + @fastify/http-proxy over TLS, no auth or validation', server: bare, load: { url: `${bare.url}/api/v1/issuing/cards`, scenario: 'connector-create' }, shape: standard },
      ...(['memory', 'redis'] as const).map((kind) => ({
        name: `C-gateway-create-${kind}`,
        description: `full gateway, card creation with a fresh requestId, ${kind} store`,
        server: gateways[kind],
        load: { url: `${gateways[kind].url}/api/v1/issuing/cards`, scenario: 'gateway-create' as const, token: tokens[kind] },
        shape: standard,
      })),
      { name: 'D-gateway-replay-redis', description: 'idempotent replays of one requestId, Redis store', server: gateways.redis, load: { url: `${gateways.redis.url}/api/v1/issuing/cards`, scenario: 'gateway-replay', token: tokens.redis }, shape: standard },
      // Every login costs a scrypt hash (~30 ms of CPU): 4 connections and 20 req/s keep the
      // latency figures about service time rather than queueing. Usernames rotate over
      // AUTH_USERS credentials, so every one stays within the default 5/min limits.
      {
        name: 'E-auth-mix-redis',
        description: `login then refresh, rotating over ${AUTH_USERS} credentials within their 5/min limits (scrypt on every login), Redis store`,
        server: gateways.redis,
        load: { url: gateways.redis.url, scenario: 'auth-mix', usernamePrefix: 'auth-', usernameCount: AUTH_USERS, password: PASSWORD },
        shape: { connections: 4, rate: 20 },
      },
    ];
    const throughput = new Map<string, RunResult[]>(scenarios.map((s) => [s.name, []]));
    const atRate = new Map<string, RunResult[]>(scenarios.map((s) => [s.name, []]));
    for (const scenario of scenarios) {
      process.stderr.write(`bench: warm-up ${scenario.name}\n`);
      await runLoad({ ...scenario.load, connections: scenario.shape.connections, durationSeconds: WARMUP });
    }
    for (let run = 1; run <= RUNS; run += 1) {
      for (const scenario of scenarios) {
        process.stderr.write(`bench: run ${run}/${RUNS} ${scenario.name}\n`);
        throughput.get(scenario.name)!.push(await runOnce(scenario.server, scenario.load, scenario.shape.connections, undefined, DURATION));
        atRate.get(scenario.name)!.push(await runOnce(scenario.server, scenario.load, Math.min(16, scenario.shape.connections), scenario.shape.rate, DURATION));
      }
    }
    const results: ScenarioResult[] = scenarios.map((scenario) => ({
      name: scenario.name,
      description: scenario.description,
      ...summarise(throughput.get(scenario.name)!),
      ratioToBareProxy: 0,
      atModerateRate: { ...summarise(atRate.get(scenario.name)!), rate: scenario.shape.rate, p99AddedMsVsBareProxy: 0 },
    }));

    const baseline = results.find((r) => r.name === 'B-bare-proxy')!;
    for (const result of results) {
      result.ratioToBareProxy = Math.round((result.rps / baseline.rps) * 1000) / 1000;
      result.atModerateRate.p99AddedMsVsBareProxy = Math.round((result.atModerateRate.p99Ms - baseline.atModerateRate.p99Ms) * 100) / 100;
    }
    const redisGateway = results.find((r) => r.name === 'C-gateway-create-redis')!;
    const target = {
      throughputRatio: redisGateway.ratioToBareProxy,
      throughputTargetMet: redisGateway.ratioToBareProxy >= 0.6,
      p99AddedMsAtModerateRate: redisGateway.atModerateRate.p99AddedMsVsBareProxy,
      p99TargetMet: redisGateway.atModerateRate.p99AddedMsVsBareProxy <= 2,
    };
    const output = {
      date: new Date().toISOString(),
      machine: { cpus: cpus().length, model: cpus()[0]?.model, node: process.version, pinned: pinning },
      settings: { runs: RUNS, durationSeconds: DURATION, warmupSeconds: WARMUP, connections: CONNECTIONS, moderateRate: MODERATE_RATE, requestLogging: LOG_REQUESTS },
      target,
      scenarios: results,
    };
    writeFileSync(join(root, 'bench', 'results.json'), `${JSON.stringify(output, null, 2)}\n`);
    printTable(results);
    process.stdout.write(
      `\nTarget (gateway on Redis vs bare proxy): throughput ratio ${target.throughputRatio} (>= 0.6: ${target.throughputTargetMet ? 'met' : 'NOT met'}), ` +
        `p99 added at ${MODERATE_RATE} req/s ${target.p99AddedMsAtModerateRate} ms (<= 2 ms: ${target.p99TargetMet ? 'met' : 'NOT met'})\nwrote bench/results.json\n`,
    );
  } finally {
    await Promise.all(servers.map((server) => server.stop()));
    await deletePrefix(redisPrefix).catch(() => undefined);
  }
}

function printTable(results: ScenarioResult[]): void {
  const rows = results.map((r) => [
    r.name,
    String(r.rps),
    r.p50Ms.toFixed(1),
    r.p99Ms.toFixed(1),
    r.p999Ms.toFixed(1),
    String(r.cpuUsPerRequest),
    r.ratioToBareProxy.toFixed(2),
    `${r.atModerateRate.rate}/s`,
    `${r.atModerateRate.p50Ms.toFixed(1)}/${r.atModerateRate.p99Ms.toFixed(1)}`,
    r.atModerateRate.p99AddedMsVsBareProxy.toFixed(1),
    String(r.non2xx + r.errors),
  ]);
  const header = ['scenario', 'req/s', 'p50 ms', 'p99 ms', 'p99.9 ms', 'CPU µs/req', 'x bare', 'fixed rate', 'p50/p99 ms', '+p99 ms', 'bad'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) => cells.map((cell, i) => cell.padEnd(widths[i]!)).join('  ');
  process.stdout.write(`${line(header)}\n${widths.map((w) => '-'.repeat(w)).join('  ')}\n${rows.map(line).join('\n')}\n`);
}

/** 5 minutes of mixed traffic on the Redis gateway; heap and handles sampled every second. */
async function soak(started: (cpu: number, args: string[]) => Promise<Server>, dir: string, ca: Buffer): Promise<void> {
  const minutes = Number(process.env['BENCH_SOAK_MINUTES'] ?? 5);
  const gateway = await started(0, ['gateway', 'redis', dir, String(LOG_REQUESTS)]);
  const tokens = await httpsJson(gateway.url, '/api/v1/auth/login', { username: 'bench', password: PASSWORD }, ca);
  const token = String(tokens['accessToken']);
  const seconds = minutes * 60;
  process.stderr.write(`bench: soak for ${seconds} s on the Redis gateway\n`);
  const [create, replay, auth] = await Promise.all([
    runLoad({ url: `${gateway.url}/api/v1/issuing/cards`, scenario: 'gateway-create', token, connections: 8, durationSeconds: seconds, overallRate: 300 }),
    runLoad({ url: `${gateway.url}/api/v1/issuing/cards`, scenario: 'gateway-replay', token, connections: 4, durationSeconds: seconds, overallRate: 100 }),
    runLoad({ url: gateway.url, scenario: 'auth-mix', usernamePrefix: 'auth-', usernameCount: AUTH_USERS, password: PASSWORD, connections: 2, durationSeconds: seconds, overallRate: 10 }),
  ]);
  const samples = gateway.stats;
  const minuteOf = (index: number) => samples.slice(Math.max(0, index), index + 60);
  const avg = (list: typeof samples, key: 'heapUsed' | 'handles') => list.reduce((sum, s) => sum + s[key], 0) / Math.max(1, list.length);
  const first = minuteOf(30); // after a 30 s warm-up
  const last = minuteOf(samples.length - 60);
  const soakResult = {
    date: new Date().toISOString(),
    seconds,
    traffic: { create, replay, auth },
    heapMiB: { firstMinute: +(avg(first, 'heapUsed') / 1048576).toFixed(1), lastMinute: +(avg(last, 'heapUsed') / 1048576).toFixed(1) },
    handles: { firstMinute: +avg(first, 'handles').toFixed(1), lastMinute: +avg(last, 'handles').toFixed(1) },
    samples: samples.length,
  };
  writeFileSync(join(root, 'bench', 'soak-results.json'), `${JSON.stringify(soakResult, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify(soakResult, null, 2)}\nwrote bench/soak-results.json\n`);
}

if (!existsSync(join(distBench, 'serve.js'))) throw new Error('run through `npm run bench` (it builds dist/ first)');
await main();
