/**
 * `npm run bench [-- --quick | --profile | --soak | --hostile]`
 *
 * Starts everything on loopback (sandbox connectors, two bare proxies, gateways on the memory
 * store, on a private redis-server and on a private Redis Cluster), pins every server to CPU 0
 * and every load generator to CPU 1 (taskset), and measures on one yardstick (docs/performance.md):
 * 1. CPU per request of each server from its own CPU time (/proc) over the requests wrk reports;
 *    each gateway scenario is compared with its bare-proxy baseline **loaded at the same time**
 *    on the same core (one wrk each), round by round, with the same pair one after the other
 *    beside it;
 * 2. the one-connection latency tax from **interleaved pairs** (one request to the baseline, one
 *    to the gateway, each alone);
 * 3. an **A/A** of both methods (two identical bare proxies) in the same run: the noise floor.
 * Every scenario's own figures (req/s, latency under load, store commands) come from its runs
 * alone. Prints the tables and writes bench/results.json.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import type { AttackOptions } from './attack.js';
import {
  AUTH_USERS,
  BENCH_ENDPOINT,
  CARD_EVENTS_DELIVERED,
  CONNECTOR_EVENTS_SECRET_FILE,
  distBench,
  httpsJson,
  NodeGroup,
  PASSWORD,
  pinnedTo,
  pinning,
  prepare,
  prioritise,
  root,
  runChild,
  seedCards,
  startCluster,
  startRedis,
  startServer,
  storeCounts,
  type Server,
  type StoreCounts,
} from './bench-servers.js';
import { hostileBodies } from './hostile-run.js';
import type { LoadOptions, LoadResult } from './load.js';
import type { ReceiverStats } from './webhook-receiver.js';
import { threadCpuMicros } from './cpu-time.js';
import { killOwnProcessesOnExit, ownProcess } from './own-processes.js';
import type { PairsOptions, PairsResult } from './pairs.js';
import { printProfileItems, profileItems, type CpuProfile, type ProfileItem } from './profile-items.js';
import { CARDS_PATH, CLIENT_ADDRESSES, BENCH_ACCOUNT, connectorEventTemplate, requestTemplate, type RequestTemplate } from './request-templates.js';
import { soak } from './soak.js';
import { startWrk, wrkVersion } from './wrk.js';
import { AA_BAND, efficiency, judgeAa, median, spread, type Spread } from './yardstick.js';

const argv = new Set(process.argv.slice(2));
const QUICK = argv.has('--quick');
const SOAK = argv.has('--soak');
const HOSTILE = argv.has('--hostile');
const PROFILE = argv.has('--profile');
const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
/** Rounds of the yardstick: each comparison at the same time, then one after the other. */
const ROUNDS = env('BENCH_ROUNDS', QUICK ? 2 : 5);
/** Seconds of one load run (each side of a comparison, each scenario alone). */
const SECONDS = env('BENCH_DURATION', QUICK ? 3 : 5);
const WARMUP_SECONDS = QUICK ? 2 : 3;
/** Connections of every throughput run, the same for both sides of a comparison (batching changes CPU per request). */
const CONNECTIONS = env('BENCH_CONNECTIONS', 16);
const WRK_THREADS = env('BENCH_WRK_THREADS', 1);
/** Interleaved pairs per repeat, and repeats, for the one-connection tax. */
const PAIRS = env('BENCH_PAIRS', QUICK ? 300 : 1500);
const PAIR_REPEATS = env('BENCH_PAIR_REPEATS', QUICK ? 1 : 3);
const PAIR_GAP_MS = 1;
/** The fixed moderate rate of the latency-under-attack goal, and how many rounds run it. */
const MODERATE_RATE = env('BENCH_RATE', 500);
const FIXED_RATE_SECONDS = env('BENCH_FIXED_RATE_DURATION', QUICK ? 3 : 8);
const FIXED_RATE_ROUNDS = Math.min(ROUNDS, QUICK ? 1 : 3);
const PROFILE_SECONDS = env('BENCH_PROFILE_DURATION', QUICK ? 5 : 15);
/** Root of another built checkout whose gateways are compared with this one's (see the comparisons). */
const COMPARE = process.env['BENCH_COMPARE'];
/** Node flags for the compared gateways only (BENCH_COMPARE may then name this checkout): a runtime setting judged the same way. */
const COMPARE_FLAGS = process.env['BENCH_COMPARE_FLAGS']?.split(' ').filter(Boolean) ?? [];
/** Concurrent requests each flood of the "under attack" scenario keeps in flight. */
const ATTACK_CONCURRENCY = env('BENCH_ATTACK_CONCURRENCY', 16);
/** Below this share of CPU 0 for the two servers of the A/A, the run says the machine was busy with other work. */
const BUSY_CORE = 0.8;
/** Logins sent one at a time to count a login's store round trips. */
const LOGINS_COUNTED = 10;
/** The events scenario's fixed rate of connector events (I), each recorded and delivered to the receiver. */
const EVENTS_RATE = env('BENCH_EVENTS_RATE', 100);
/** How long I waits, after its load, for the receiver to have every recorded event: a hang guard, reported when hit. */
const EVENTS_DRAIN_GUARD_MS = 30_000;

/**
 * The load generator of the throughput runs: wrk where it is installed, else the bench's own
 * Node generator, whose figures are not comparable (it saturates its own core before the
 * server's, so CPU per request then moves with the generator). BENCH_GENERATOR=node forces it.
 */
const WRK = process.env['BENCH_GENERATOR'] === 'node' ? undefined : wrkVersion();
const GENERATOR = WRK ? `${WRK} -t${WRK_THREADS} -c${CONNECTIONS}` : `node generator (bench/load.ts) -c${CONNECTIONS}: NOT comparable with wrk's figures`;

/** One load: what is sent to which server, and the Redis it costs commands on. */
interface LoadSpec {
  name: string;
  description: string;
  server: Server;
  template: RequestTemplate;
  /** PEM of the bench's CA, for the TLS servers. */
  ca?: string;
  redis?: Redis | NodeGroup;
  /** The scenario of the same load shape through the bare proxy, when not B-bare-proxy. */
  baseline?: string;
}

/** A gateway load against its baseline, measured at the same time, one after the other, and in pairs. */
interface Comparison {
  name: string;
  baseline: LoadSpec;
  subject: LoadSpec;
  /** Runs right after the subject alone in every round (F after C on Redis). */
  followedBy?: LoadSpec & { attack: true };
}

/** One load's figures over one run. */
interface RunResult {
  name: string;
  requests: number;
  rps: number;
  p50Us: number;
  p99Us: number;
  p999Us: number;
  non2xx: number;
  errors: number;
  cpuUsPerRequest: number;
  /** The server's CPU over the run's wall time: its share of its core. */
  coreBusy: number;
  storeCommands?: number;
  storeRoundTrips?: number;
}

const runLoad = (options: LoadOptions) => runChild<LoadResult>('load.js', options, 'load generator');
const runAttack = (options: AttackOptions) => runChild<{ statuses: Record<string, number> }>('attack.js', options, 'attacker');
const count = (redis: Redis | NodeGroup): Promise<StoreCounts> => (redis instanceof NodeGroup ? redis.count() : storeCounts(redis));

let scratch = '';

/** One load for `seconds` with wrk (or the Node generator, or at a fixed rate with it: wrk cannot send on a schedule). */
async function generate(spec: LoadSpec, seconds: number, connections: number, rate?: number): Promise<LoadResult> {
  if (rate !== undefined || !WRK) {
    return runLoad({
      origin: spec.server.url,
      template: spec.template,
      ...(spec.ca && { ca: spec.ca }),
      connections,
      durationSeconds: seconds,
      ...(rate !== undefined && { overallRate: rate }),
    });
  }
  const run = startWrk({
    origin: spec.server.url,
    template: spec.template,
    connections,
    threads: WRK_THREADS,
    seconds,
    dir: scratch,
    prefix: pinnedTo(1),
    own: ownProcess,
  });
  prioritise(run.process.pid);
  const figures = await run.result;
  return {
    requests: figures.requests,
    rps: figures.requests / (figures.durationUs / 1e6),
    p50Us: figures.p50Us,
    p99Us: figures.p99Us,
    p999Us: figures.p999Us,
    non2xx: figures.statusErrors,
    errors: figures.connectErrors + figures.readErrors + figures.writeErrors + figures.timeouts,
  };
}

/** What the attacker got back, run by run (429/401/405/503 expected; never a 2xx for the flood). */
const attackCounts: Record<string, number>[] = [];

/**
 * Loads every spec at once for `seconds` (one generator each, all started together) and reads
 * each server's CPU time and each Redis's counts just before and just after.
 */
async function measure(
  specs: readonly LoadSpec[],
  seconds: number,
  options: { connections?: number; rate?: number; attack?: boolean } = {},
): Promise<RunResult[]> {
  if (new Set(specs.map((spec) => spec.server)).size !== specs.length) throw new Error('loads measured at the same time need servers of their own');
  const connections = options.connections ?? CONNECTIONS;
  const storeBefore = await Promise.all(specs.map((spec) => spec.redis && count(spec.redis)));
  const cpuBefore = await Promise.all(specs.map((spec) => spec.server.cpuMicros()));
  const started = performance.now();
  const attacked = options.attack
    ? runAttack({ url: specs[0]!.server.url, ca: specs[0]!.ca ?? '', durationSeconds: seconds + 1, concurrency: ATTACK_CONCURRENCY })
    : undefined;
  const figures = await Promise.all(specs.map((spec) => generate(spec, seconds, connections, options.rate)));
  const wallUs = (performance.now() - started) * 1000;
  const cpuAfter = await Promise.all(specs.map((spec) => spec.server.cpuMicros()));
  const storeAfter = await Promise.all(specs.map((spec) => spec.redis && count(spec.redis)));
  if (attacked) attackCounts.push((await attacked).statuses);
  return specs.map((spec, i) => {
    const result = figures[i]!;
    const requests = Math.max(1, result.requests);
    const cpu = cpuAfter[i]! - cpuBefore[i]!;
    const before = storeBefore[i];
    const after = storeAfter[i];
    return {
      name: spec.name,
      ...result,
      cpuUsPerRequest: cpu / requests,
      coreBusy: cpu / wallUs,
      ...(before &&
        after && { storeCommands: (after.commands - before.commands) / requests, storeRoundTrips: (after.roundTrips - before.roundTrips) / requests }),
    };
  });
}

/**
 * The attacker alone against `server` (no legitimate load) for `seconds`: the server's CPU per
 * refused attack request. Every attempt counts, answered (429, 401, 405, ...) or closed at
 * accept by the connection budget (the attacker's `error`).
 */
async function attackAlone(
  server: Server,
  ca: string,
  seconds: number,
): Promise<{ cpuUsPerRefusal: number; attempts: number; statuses: Record<string, number> }> {
  const before = await server.cpuMicros();
  const { statuses } = await runAttack({ url: server.url, ca, durationSeconds: seconds, concurrency: ATTACK_CONCURRENCY });
  const cpu = (await server.cpuMicros()) - before;
  const attempts = Object.values(statuses).reduce((sum, n) => sum + n, 0);
  return { cpuUsPerRefusal: cpu / Math.max(1, attempts), attempts, statuses };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Seconds of quiet over which a Redis's own traffic is counted (idleStoreRate). */
const IDLE_SECONDS = 3;

/**
 * What a Redis is sent while no request comes, per second: the gateways' health checks (a PING a
 * second), their reads of the credentials' not-before instants and, on the events gateway, the
 * delivery loop's polls (a claim and a backlog read per endpoint a second). The per-request
 * counts of requests sent one at a time (the pairs, the logins) are taken less it.
 */
async function idleStoreRate(redis: Redis | NodeGroup): Promise<StoreCounts> {
  const before = await count(redis);
  const started = performance.now();
  await sleep(IDLE_SECONDS * 1000);
  const after = await count(redis);
  const seconds = (performance.now() - started) / 1000;
  return { commands: (after.commands - before.commands) / seconds, roundTrips: (after.roundTrips - before.roundTrips) / seconds };
}

/** Counts of `redis` around `work`, less its idle traffic over the same time (none counted below 0). */
async function countedLessIdle(redis: Redis | NodeGroup | undefined, idle: StoreCounts | undefined, work: () => Promise<void>) {
  const before = redis && (await count(redis));
  const started = performance.now();
  await work();
  const after = redis && (await count(redis));
  const seconds = (performance.now() - started) / 1000;
  if (!before || !after) return undefined;
  const less = (key: keyof StoreCounts) => Math.max(0, after[key] - before[key] - (idle ? idle[key] * seconds : 0));
  return { commands: less('commands'), roundTrips: less('roundTrips') };
}

/** The comparison's interleaved pairs, with the subject's store commands per request over them. */
async function pairs(comparison: Comparison) {
  const target = (spec: LoadSpec) => ({ origin: spec.server.url, template: spec.template, ...(spec.ca && { ca: spec.ca }) });
  const options: PairsOptions = {
    baseline: target(comparison.baseline),
    subject: target(comparison.subject),
    pairs: PAIRS,
    repeats: PAIR_REPEATS,
    warmupPairs: 100,
    gapMs: PAIR_GAP_MS,
  };
  const redis = comparison.subject.redis;
  // A baseline with a Redis of its own (C with events off) is counted too; one sharing the subject's could not be told apart.
  const baselineRedis = comparison.baseline.redis !== redis ? comparison.baseline.redis : undefined;
  const [idle, baselineIdle] = await Promise.all([redis && idleStoreRate(redis), baselineRedis && idleStoreRate(baselineRedis)]);
  let result: PairsResult | undefined;
  let baselineCounts: StoreCounts | undefined;
  const counts = await countedLessIdle(redis, idle, async () => {
    baselineCounts = await countedLessIdle(baselineRedis, baselineIdle, async () => {
      result = await runChild<PairsResult>('pairs.js', options, 'interleaved pairs');
    });
  });
  if (!result) throw new Error('the interleaved pairs gave no result');
  const sent = Math.max(1, result.sent);
  const per = (counted: StoreCounts | undefined, key: keyof StoreCounts) => (counted ? Math.round((counted[key] / sent) * 10) / 10 : undefined);
  const perRequest = (key: keyof StoreCounts) => per(counts, key);
  return {
    ...result,
    taxP50Us: Math.round(median(result.repeats.map((r) => r.taxP50Us))),
    taxP99Us: Math.round(median(result.repeats.map((r) => r.taxP99Us))),
    pairedMedianUs: Math.round(median(result.repeats.map((r) => r.pairedMedianUs))),
    // Less the store's idle traffic; one decimal, what is left of it is not exact.
    storeCommandsPerRequest: perRequest('commands'),
    storeRoundTripsPerRequest: perRequest('roundTrips'),
    ...(baselineRedis && {
      baselineStoreCommandsPerRequest: per(baselineCounts, 'commands'),
      baselineStoreRoundTripsPerRequest: per(baselineCounts, 'roundTrips'),
    }),
  };
}

/** The events scenario (I): connector events at a fixed rate, recorded by the gateway and delivered to the receiver. */
interface EventsSpec {
  name: string;
  description: string;
  server: Server;
  receiver: Server;
  template: RequestTemplate;
  ca: string;
  redis: Redis;
  /** The endpoint's queue of pending deliveries: empty before a run starts. */
  queueKey: string;
}

/** One run of I. */
interface EventsRun {
  seconds: number;
  /** Events answered 202 by the connector listener, and those answered anything else (or not at all). */
  recorded: number;
  refused: number;
  recordedPerSecond: number;
  /** Deliveries received over the time from the load's start to the last one's arrival. */
  deliveredPerSecond: number;
  received: number;
  /** Deliveries received twice (the same webhook-id). */
  duplicates: number;
  /** From the load's end to the last delivery's arrival; undefined when some were missing after the guard. */
  drainMs: number | undefined;
  /** Recorded (the event's createdAt) to received (the receiver's clock), µs. */
  deliveryP50Us: number;
  deliveryP99Us: number;
  deliveryMaxUs: number;
  /** The connector's POST, answered, µs (scheduled instant to answer). */
  postP50Us: number;
  postP99Us: number;
  /** The gateway's CPU (its idle share included), store commands and reads (its idle traffic taken out) over the load and the drain, per event recorded: recording and delivering it. */
  cpuUsPerEvent: number;
  coreBusy: number;
  storeCommandsPerEvent: number;
  storeRoundTripsPerEvent: number;
}

async function runEvents(spec: EventsSpec, seconds: number): Promise<EventsRun> {
  const connectorUrl = spec.server.connectorUrl;
  if (!connectorUrl) throw new Error(`${spec.server.name} has no connector listener`);
  // Nothing left over to deliver first (earlier runs; C's cards with BENCH_CARD_EVENTS_DELIVERED).
  const drainedBy = performance.now() + EVENTS_DRAIN_GUARD_MS;
  while (Number(await spec.redis.zcard(spec.queueKey)) > 0 && performance.now() < drainedBy) await sleep(100);
  const idle = await idleStoreRate(spec.redis);
  await spec.receiver.ask('receiver-reset');
  const stats = () => spec.receiver.ask<ReceiverStats>('receiver-stats');
  const cpuBefore = await spec.server.cpuMicros();
  const startedMs = Date.now();
  let load: LoadResult | undefined;
  let received = await stats();
  let endedMs = 0;
  const store = await countedLessIdle(spec.redis, idle, async () => {
    load = await runLoad({
      origin: connectorUrl,
      template: spec.template,
      ca: spec.ca,
      connections: CONNECTIONS,
      durationSeconds: seconds,
      overallRate: EVENTS_RATE,
    });
    endedMs = Date.now();
    const recordedNow = load.requests - load.non2xx - load.errors;
    const guard = performance.now() + EVENTS_DRAIN_GUARD_MS;
    received = await stats();
    while (received.unique < recordedNow && performance.now() < guard) {
      await sleep(50);
      received = await stats();
    }
  });
  const doneMs = Date.now();
  const cpu = (await spec.server.cpuMicros()) - cpuBefore;
  if (!load || !store) throw new Error(`${spec.name}: the load gave no result`);
  const recorded = load.requests - load.non2xx - load.errors;
  const events = Math.max(1, recorded);
  return {
    seconds,
    recorded,
    refused: load.requests - recorded,
    // Over the generator's own time (its start is not the load's), and from the first delivery to the last.
    recordedPerSecond: Math.round(load.rps * (recorded / Math.max(1, load.requests))),
    deliveredPerSecond: received.lastAtMs > received.firstAtMs ? Math.round((received.unique - 1) / ((received.lastAtMs - received.firstAtMs) / 1000)) : 0,
    received: received.received,
    duplicates: received.received - received.unique,
    drainMs: received.unique >= recorded ? Math.max(0, received.lastAtMs - endedMs) : undefined,
    deliveryP50Us: received.p50Us,
    deliveryP99Us: received.p99Us,
    deliveryMaxUs: received.maxUs,
    postP50Us: load.p50Us,
    postP99Us: load.p99Us,
    cpuUsPerEvent: Math.round(cpu / events),
    coreBusy: Math.round((cpu / ((doneMs - startedMs) * 1000)) * 100) / 100,
    storeCommandsPerEvent: Math.round((store.commands / events) * 10) / 10,
    storeRoundTripsPerEvent: Math.round((store.roundTrips / events) * 10) / 10,
  };
}

/** I's runs as one figure each: the median of the runs (the sums for counts). */
function summariseEvents(runs: readonly EventsRun[]) {
  const mid = (pick: (run: EventsRun) => number) => Math.round(median(runs.map(pick)) * 100) / 100;
  const drains = runs.map((run) => run.drainMs);
  return {
    runs: runs.length,
    rate: EVENTS_RATE,
    recorded: runs.reduce((sum, run) => sum + run.recorded, 0),
    refused: runs.reduce((sum, run) => sum + run.refused, 0),
    duplicates: runs.reduce((sum, run) => sum + run.duplicates, 0),
    recordedPerSecond: mid((run) => run.recordedPerSecond),
    deliveredPerSecond: mid((run) => run.deliveredPerSecond),
    deliveryP50Us: mid((run) => run.deliveryP50Us),
    deliveryP99Us: mid((run) => run.deliveryP99Us),
    deliveryMaxUs: Math.max(...runs.map((run) => run.deliveryMaxUs)),
    postP50Us: mid((run) => run.postP50Us),
    postP99Us: mid((run) => run.postP99Us),
    cpuUsPerEvent: mid((run) => run.cpuUsPerEvent),
    coreBusy: mid((run) => run.coreBusy),
    storeCommandsPerEvent: mid((run) => run.storeCommandsPerEvent),
    storeRoundTripsPerEvent: mid((run) => run.storeRoundTripsPerEvent),
    /** Per run; null: not every recorded event was delivered within the guard. */
    drainMs: drains.map((ms) => ms ?? null),
    rounds: runs,
  };
}

/** A login's store commands and round trips: `LOGINS_COUNTED` logins one at a time, each from its own forwarded address. */
async function loginStoreCost(gateway: Server, redis: Redis, ca: Buffer): Promise<{ commands: number; roundTrips: number }> {
  const idle = await idleStoreRate(redis);
  const counted = await countedLessIdle(redis, idle, async () => {
    for (let i = 0; i < LOGINS_COUNTED; i += 1) {
      await httpsJson(gateway.url, '/api/v1/auth/login', { username: `auth-${AUTH_USERS - 1 - i}`, password: PASSWORD }, ca, {
        'x-forwarded-for': `10.250.0.${i + 1}`,
      });
    }
  });
  const perLogin = (key: keyof StoreCounts) => Math.round(((counted?.[key] ?? 0) / LOGINS_COUNTED) * 10) / 10;
  return { commands: perLogin('commands'), roundTrips: perLogin('roundTrips') };
}

interface Measured {
  rps: number;
  p50Us: number;
  p99Us: number;
  p999Us: number;
  /** CPU time of the server per answered request, each run alone on its core. */
  cpuUsPerRequest: number;
  /** Share of its core the server used: well below 1 at full load means the run was limited elsewhere (the load generator's core, Redis). */
  serverCoreBusy: number;
  storeCommandsPerRequest?: number;
  /** Reads of commands by Redis per request: under load one read carries several requests' commands. */
  storeRoundTripsPerRequest?: number;
  /** Each run's req/s and CPU per request, in the order run: the figures above are their medians. */
  rounds: { rps: number; cpuUsPerRequest: number }[];
  non2xx: number;
  errors: number;
}

function summarise(results: readonly RunResult[]): Measured {
  const defined = (key: 'storeCommands' | 'storeRoundTrips') => results.map((r) => r[key]).filter((value): value is number => value !== undefined);
  const store = defined('storeCommands');
  const trips = defined('storeRoundTrips');
  return {
    rps: Math.round(median(results.map((r) => r.rps))),
    p50Us: Math.round(median(results.map((r) => r.p50Us))),
    p99Us: Math.round(median(results.map((r) => r.p99Us))),
    p999Us: Math.round(median(results.map((r) => r.p999Us))),
    cpuUsPerRequest: Math.round(median(results.map((r) => r.cpuUsPerRequest))),
    serverCoreBusy: Math.round(median(results.map((r) => r.coreBusy)) * 100) / 100,
    ...(store.length > 0 && { storeCommandsPerRequest: Math.round(median(store) * 100) / 100 }),
    ...(trips.length > 0 && { storeRoundTripsPerRequest: Math.round(median(trips) * 100) / 100 }),
    rounds: results.map((r) => ({ rps: Math.round(r.rps), cpuUsPerRequest: Math.round(r.cpuUsPerRequest) })),
    non2xx: results.reduce((sum, r) => sum + r.non2xx, 0),
    errors: results.reduce((sum, r) => sum + r.errors, 0),
  };
}

interface ComparisonResult {
  name: string;
  baseline: string;
  subject: string;
  /** Baseline CPU per request over the subject's, each round with both loaded at the same time on the same core. */
  atTheSameTime: { efficiency: Spread; baselineCpuUsPerRequest: Spread; subjectCpuUsPerRequest: Spread; coreBusy: Spread };
  /** The same, the baseline alone and then the subject alone, right after, in each round. */
  oneAfterTheOther: { efficiency: Spread; baselineCpuUsPerRequest: Spread; subjectCpuUsPerRequest: Spread };
  /** One connection, interleaved pairs: the subject's latency minus the baseline's, µs, medians of the repeats. */
  tax: Awaited<ReturnType<typeof pairs>>;
}

function compared(comparison: Comparison, together: [RunResult, RunResult][], apart: [RunResult, RunResult][], tax: ComparisonResult['tax']): ComparisonResult {
  const side = (runs: [RunResult, RunResult][], i: 0 | 1) =>
    spread(
      runs.map((pair) => pair[i].cpuUsPerRequest),
      0,
    );
  const ratios = (runs: [RunResult, RunResult][]) =>
    spread(
      runs.map(([b, s]) => efficiency(b.cpuUsPerRequest, s.cpuUsPerRequest)),
      3,
    );
  return {
    name: comparison.name,
    baseline: comparison.baseline.name,
    subject: comparison.subject.name,
    atTheSameTime: {
      efficiency: ratios(together),
      baselineCpuUsPerRequest: side(together, 0),
      subjectCpuUsPerRequest: side(together, 1),
      coreBusy: spread(
        together.map(([b, s]) => b.coreBusy + s.coreBusy),
        2,
      ),
    },
    oneAfterTheOther: { efficiency: ratios(apart), baselineCpuUsPerRequest: side(apart, 0), subjectCpuUsPerRequest: side(apart, 1) },
    tax,
  };
}

async function main(): Promise<void> {
  killOwnProcessesOnExit();
  const dir = mkdtempSync(join(tmpdir(), 'gw-bench-'));
  scratch = dir;
  // Also on an interrupt, where the finally below does not run.
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  if (!WRK) {
    process.stderr.write(
      `bench: WARNING: ${process.env['BENCH_GENERATOR'] === 'node' ? 'BENCH_GENERATOR=node' : 'wrk is not installed (Debian: apt-get install wrk)'}; ` +
        "the throughput runs use the bench's own Node generator, which saturates its core before the server's: " +
        "CPU per request and every ratio to the bare proxy are NOT comparable with wrk's figures.\n",
    );
  }
  const loadBefore = loadavg();
  const servers: Server[] = [];
  const redis = await startRedis();
  // The gateway with events off has a Redis of its own: each side of "events on vs off" counts its own commands.
  const eventsOffRedis = SOAK || HOSTILE ? undefined : await startRedis();
  const cluster = SOAK || HOSTILE || PROFILE ? undefined : await startCluster();
  const started = async (name: string, cpu: number, args: string[], flags: string[] = [], benchDir = distBench) => {
    const server = await startServer(name, cpu, args, flags, benchDir);
    servers.push(server);
    return server;
  };
  try {
    // The upstream connector shares CPU 1 with the load generators; A's connector is on CPU 0.
    const upstream = await started('upstream-connector', 1, ['connector']);
    // The partner's webhook endpoint (the events scenario, I) answers on the generators' core too.
    const receiver = await started('receiver', 1, ['receiver']);
    await prepare(dir, upstream.url, redis.url, cluster?.nodes ?? ['127.0.0.1:1'], {
      receiverUrl: receiver.url,
      eventsOffRedisUrl: eventsOffRedis?.url ?? redis.url,
    });
    const ca = readFileSync(join(dir, 'tls.crt'));
    const caText = ca.toString('utf8');

    if (SOAK) return await soak(started, dir, ca);
    if (HOSTILE) return await hostileBodies(started, dir, ca, QUICK);

    // Every server is up at once, on the same core, idle but the ones under load.
    const direct = await started('A-connector', 0, ['connector']);
    const bare = await started('B-bare-proxy', 0, ['bare-proxy', upstream.url, dir]);
    const bareTwin = await started('B-bare-proxy-twin', 0, ['bare-proxy', upstream.url, dir]);
    const gateways = {
      memory: await started('C-gateway-memory', 0, ['gateway', 'memory', dir]),
      redis: await started('C-gateway-redis', 0, ['gateway', 'redis', dir]),
      redisEventsOff: await started('C-gateway-redis-events-off', 0, ['gateway', 'redis-events-off', dir]),
      ...(cluster && { cluster: await started('C-gateway-cluster', 0, ['gateway', 'cluster', dir]) }),
    };
    const login = async (server: Server) =>
      String((await httpsJson(server.url, '/api/v1/auth/login', { username: 'bench', password: PASSWORD }, ca))['accessToken']);
    const through = (scenario: 'gateway-create' | 'gateway-replay' | 'gateway-read', path: string, token: string) =>
      requestTemplate(scenario, path, { token, clientAddresses: CLIENT_ADDRESSES });
    const tokens = {
      memory: await login(gateways.memory),
      redis: await login(gateways.redis),
      redisEventsOff: await login(gateways.redisEventsOff),
      ...(gateways.cluster && { cluster: await login(gateways.cluster) }),
    };
    // The card lifecycle (G, H): cards of the bench account in the upstream connector, read one at
    // a time and a page of 100 at a time, through the gateway and through the bare proxy (which
    // passes the connector's own query, the account included, and answers its records unmasked).
    const seeded = await seedCards(gateways.redis.url, tokens.redis, ca, 100);
    const account = `issuingAccount=${BENCH_ACCOUNT}`;

    const tls = { ca: caText };
    const B: LoadSpec = {
      name: 'B-bare-proxy',
      description: 'Fastify + @fastify/http-proxy over TLS, no auth or validation',
      server: bare,
      template: requestTemplate('connector-create', CARDS_PATH, {}),
      ...tls,
    };
    const BTwin: LoadSpec = { ...B, name: 'B-bare-proxy-twin', description: 'a second bare proxy, identical to B: the A/A', server: bareTwin };
    const stores = {
      memory: 'memory store',
      redis: `Redis store, events on: each card's card.created recorded in its record's round trip, one endpoint for the account (${
        CARD_EVENTS_DELIVERED ? 'which takes it: delivered to the receiver meanwhile' : 'taking every type but card.created: delivered nowhere'
      })`,
      'redis-events-off': 'Redis store, events off',
      cluster: 'Redis Cluster (3 masters) store',
    };
    const createOn = (kind: keyof typeof stores, server: Server, token: string): LoadSpec => ({
      name: `C-gateway-create-${kind}`,
      description: `full gateway, card creation with a fresh requestId, ${stores[kind]}`,
      server,
      template: through('gateway-create', CARDS_PATH, token),
      ...tls,
      ...(kind === 'redis' && { redis: redis.client }),
      ...(kind === 'redis-events-off' && eventsOffRedis && { redis: eventsOffRedis.client }),
      ...(kind === 'cluster' && cluster && { redis: cluster.group }),
    });
    const C = {
      memory: createOn('memory', gateways.memory, tokens.memory),
      redis: createOn('redis', gateways.redis, tokens.redis),
      redisEventsOff: createOn('redis-events-off', gateways.redisEventsOff, tokens.redisEventsOff),
    };
    const F: LoadSpec & { attack: true } = {
      ...C.redis,
      name: 'F-gateway-create-redis-under-attack',
      description: `C on Redis while a second process floods logins (random usernames, 1000-character passwords, from 127.0.0.2) and token-shaped 8 KiB URLs (from 127.0.0.3), ${ATTACK_CONCURRENCY} in flight each`,
      attack: true,
    };
    const G = {
      bare: {
        name: 'G-bare-proxy-get-card',
        description: 'GET of one card through the bare proxy (to the connector, account in the query)',
        server: bare,
        template: requestTemplate('connector-read', `${CARDS_PATH}/${seeded[0]}?${account}`, {}),
        ...tls,
      },
      gateway: {
        name: 'G-gateway-get-card-redis',
        description: 'GET of one card (masked), full gateway, Redis store',
        server: gateways.redis,
        template: through('gateway-read', `${CARDS_PATH}/${seeded[0]}`, tokens.redis),
        ...tls,
        redis: redis.client,
        baseline: 'G-bare-proxy-get-card',
      },
    } satisfies Record<string, LoadSpec>;
    const H = {
      bare: {
        name: 'H-bare-proxy-list-100',
        description: 'GET of a page of 100 cards through the bare proxy',
        server: bare,
        template: requestTemplate('connector-read', `${CARDS_PATH}?${account}&limit=100`, {}),
        ...tls,
      },
      gateway: {
        name: 'H-gateway-list-100-redis',
        description: 'GET of a page of 100 cards (masked), full gateway, Redis store',
        server: gateways.redis,
        template: through('gateway-read', `${CARDS_PATH}?limit=100`, tokens.redis),
        ...tls,
        redis: redis.client,
        baseline: 'H-bare-proxy-list-100',
      },
    } satisfies Record<string, LoadSpec>;
    // BENCH_COMPARE=<another checkout, built>: its gateways on memory and on Redis, with the same
    // configuration and stores, compared with this build's on the same yardstick (the other
    // build as the baseline: above 1, this build is cheaper).
    const twins = COMPARE
      ? await (async () => {
          const benchDir = join(COMPARE, 'dist', 'bench');
          const memory = await started('C-gateway-memory-compared', 0, ['gateway', 'memory', dir], COMPARE_FLAGS, benchDir);
          const onRedis = await started('C-gateway-redis-compared', 0, ['gateway', 'redis', dir], COMPARE_FLAGS, benchDir);
          const twin = (spec: LoadSpec, server: Server, token: string): LoadSpec => ({
            ...spec,
            name: `${spec.name}-compared`,
            description: `${spec.description}, served by the build in ${COMPARE}`,
            server,
            template: through('gateway-create', CARDS_PATH, token),
          });
          return [twin(C.memory, memory, await login(memory)), twin(C.redis, onRedis, await login(onRedis))];
        })()
      : [];

    const comparisons: Comparison[] = [
      // The A/A first: the noise floor every other comparison is read against.
      { name: 'A/A: B vs its twin', baseline: B, subject: BTwin },
      // What recording card.created costs a card: the same gateway and load, events on against off
      // (before C vs B, which runs C on Redis a few times more each round: its sides come to it about as warm).
      { name: 'C on Redis: events on vs off', baseline: C.redisEventsOff, subject: C.redis },
      { name: 'C on Redis vs B', baseline: B, subject: C.redis, followedBy: F },
      { name: 'C on memory vs B', baseline: B, subject: C.memory },
      { name: 'G read one card vs the bare proxy', baseline: G.bare, subject: G.gateway },
      { name: 'H page of 100 vs the bare proxy', baseline: H.bare, subject: H.gateway },
      ...twins.map((twin, i) => ({ name: `${[C.memory, C.redis][i]!.name}: this build vs ${COMPARE}`, baseline: twin, subject: [C.memory, C.redis][i]! })),
    ];
    // Scenarios measured alone only (their own figures, their CPU ratio to B's runs alone).
    const alone: LoadSpec[] = [
      {
        name: 'A-connector-direct',
        description: 'sandbox connector called directly (plain HTTP)',
        server: direct,
        template: requestTemplate('connector-create', '/v1/cards', {}),
      },
      ...(gateways.cluster && tokens.cluster ? [createOn('cluster', gateways.cluster, tokens.cluster)] : []),
      {
        name: 'D-gateway-replay-redis',
        description: 'idempotent replays of one requestId, Redis store',
        server: gateways.redis,
        template: through('gateway-replay', CARDS_PATH, tokens.redis),
        ...tls,
        redis: redis.client,
      },
    ];
    // Every login costs a scrypt hash (~30 ms of CPU): 4 connections at 20 req/s keep the latency
    // about service time rather than queueing. Usernames rotate over AUTH_USERS credentials, so
    // every one stays within the default 5/min limits. The Node generator's alone (two requests a unit).
    const E = {
      name: 'E-auth-mix-redis',
      description: `login then refresh, rotating over ${AUTH_USERS} credentials within their 5/min limits (scrypt on every login), Redis store, fixed 20/s`,
      server: gateways.redis,
    };

    // Events (I): the connector posts transaction.authorized events to the Redis gateway's
    // connector listener at a fixed rate (the Node generator, on schedule); each is recorded and
    // delivered to the receiver. Its figures are its own: no bare-proxy baseline does this.
    const I: EventsSpec = {
      name: 'I-events-redis',
      description: `transaction.authorized events posted by the connector to the connector listener at ${EVENTS_RATE}/s (each its own eventId), recorded on Redis and delivered to the receiver (one endpoint, its default maxInFlight and pollIntervalMs)`,
      server: gateways.redis,
      receiver,
      template: connectorEventTemplate(readFileSync(join(dir, CONNECTOR_EVENTS_SECRET_FILE), 'utf8'), seeded[0]!),
      ca: caText,
      redis: redis.client,
      queueKey: `bench:{ev:${BENCH_ACCOUNT}}q:${BENCH_ENDPOINT}`,
    };

    // BENCH_ONLY=C-gateway-create-redis,G (name prefixes): only the comparisons and scenarios
    // whose subject is named (the A/A always runs: it says whether the rest can be read).
    const only = process.env['BENCH_ONLY']?.split(',').filter(Boolean);
    const named = (name: string) => !only || only.some((prefix) => name.startsWith(prefix));
    const chosen = comparisons.filter((c, i) => i === 0 || named(c.subject.name) || named(c.name));
    const chosenAlone = alone.filter((spec) => named(spec.name));
    const withE = named(E.name) && !PROFILE;
    const withI = named(I.name) && !PROFILE;

    process.stderr.write(`bench: load generator ${GENERATOR}; load average ${loadBefore.map((x) => x.toFixed(2)).join(' ')}\n`);
    const specs = [
      ...new Map([...chosen.flatMap((c) => [c.baseline, c.subject, ...(c.followedBy ? [c.followedBy] : [])]), ...chosenAlone].map((s) => [s.name, s])).values(),
    ];
    for (const spec of specs) {
      process.stderr.write(`bench: warm-up ${spec.name}\n`);
      await measure([spec], WARMUP_SECONDS);
    }
    if (withI) {
      process.stderr.write(`bench: warm-up ${I.name}\n`);
      await runEvents(I, WARMUP_SECONDS);
    }

    if (PROFILE) return await profile(chosen);

    const together = new Map(chosen.map((c) => [c.name, [] as [RunResult, RunResult][]]));
    const apart = new Map(chosen.map((c) => [c.name, [] as [RunResult, RunResult][]]));
    const runsAlone = new Map<string, RunResult[]>();
    const addAlone = (result: RunResult) => runsAlone.set(result.name, [...(runsAlone.get(result.name) ?? []), result]);
    const fixedRate = new Map<string, RunResult[]>();
    const attackAloneRuns: Awaited<ReturnType<typeof attackAlone>>[] = [];
    const authMix: RunResult[] = [];
    const eventRuns: EventsRun[] = [];
    const underAttackRatios: number[] = [];
    for (let round = 1; round <= ROUNDS; round += 1) {
      for (const comparison of chosen) {
        process.stderr.write(`bench: round ${round}/${ROUNDS} ${comparison.name}\n`);
        const [b, s] = await measure([comparison.baseline, comparison.subject], SECONDS);
        together.get(comparison.name)!.push([b!, s!]);
        const [bAlone] = await measure([comparison.baseline], SECONDS);
        const [sAlone] = await measure([comparison.subject], SECONDS);
        apart.get(comparison.name)!.push([bAlone!, sAlone!]);
        addAlone(bAlone!);
        addAlone(sAlone!);
        if (comparison.followedBy) {
          const [attacked] = await measure([comparison.followedBy], SECONDS, { attack: true });
          addAlone(attacked!);
          underAttackRatios.push(attacked!.rps / sAlone!.rps);
        }
      }
      for (const spec of chosenAlone) {
        process.stderr.write(`bench: round ${round}/${ROUNDS} ${spec.name}\n`);
        addAlone((await measure([spec], SECONDS))[0]!);
      }
      if (round > FIXED_RATE_ROUNDS) continue;
      // At a fixed moderate rate (the Node generator, on schedule): C on Redis and F, then the attacker alone.
      for (const comparison of chosen.filter((c) => c.followedBy)) {
        for (const spec of [comparison.subject, comparison.followedBy!]) {
          process.stderr.write(`bench: round ${round} ${spec.name} at ${MODERATE_RATE}/s\n`);
          const [run] = await measure([spec], FIXED_RATE_SECONDS, { rate: MODERATE_RATE, attack: spec === comparison.followedBy });
          fixedRate.set(spec.name, [...(fixedRate.get(spec.name) ?? []), run!]);
        }
        attackAloneRuns.push(await attackAlone(comparison.subject.server, caText, SECONDS));
      }
      if (withE) {
        process.stderr.write(`bench: round ${round} ${E.name}\n`);
        const before = await E.server.cpuMicros();
        const storeBefore = await storeCounts(redis.client);
        const result = await runLoad({
          origin: E.server.url,
          authMix: { usernamePrefix: 'auth-', usernameCount: AUTH_USERS, password: PASSWORD },
          ca: caText,
          connections: 4,
          durationSeconds: FIXED_RATE_SECONDS,
          overallRate: 20,
        });
        const cpu = (await E.server.cpuMicros()) - before;
        const storeAfter = await storeCounts(redis.client);
        const units = Math.max(1, result.requests);
        authMix.push({
          name: E.name,
          ...result,
          cpuUsPerRequest: cpu / units,
          coreBusy: cpu / (FIXED_RATE_SECONDS * 1e6),
          storeCommands: (storeAfter.commands - storeBefore.commands) / units,
          storeRoundTrips: (storeAfter.roundTrips - storeBefore.roundTrips) / units,
        });
      }
      if (withI) {
        process.stderr.write(`bench: round ${round} ${I.name} at ${EVENTS_RATE}/s\n`);
        eventRuns.push(await runEvents(I, FIXED_RATE_SECONDS));
      }
    }
    const comparisonResults: ComparisonResult[] = [];
    for (const comparison of chosen) {
      process.stderr.write(`bench: interleaved pairs, ${comparison.name}\n`);
      comparisonResults.push(compared(comparison, together.get(comparison.name)!, apart.get(comparison.name)!, await pairs(comparison)));
    }
    const loginCost = named('E') || !only ? await loginStoreCost(gateways.redis, redis.client, ca) : undefined;
    const loadAfter = loadavg();

    const bAlone = summarise(runsAlone.get(B.name) ?? []);
    const scenarios = [...runsAlone.entries()].map(([name, runs]) => {
      const spec = specs.find((s) => s.name === name)!;
      const measured = summarise(runs);
      const baseline = spec.baseline ? summarise(runsAlone.get(spec.baseline) ?? []) : bAlone;
      const rates = fixedRate.get(name);
      return {
        name,
        description: spec.description,
        ...measured,
        ...(spec.baseline && { baseline: spec.baseline }),
        ratioToBareProxy: Math.round((measured.rps / baseline.rps) * 1000) / 1000,
        cpuRatioToBareProxy: Math.round((baseline.cpuUsPerRequest / measured.cpuUsPerRequest) * 1000) / 1000,
        ...(rates && { atModerateRate: { ...summarise(rates), rate: MODERATE_RATE } }),
        ...(name === F.name &&
          attackAloneRuns.length > 0 && {
            attackAlone: {
              serverCpuUsPerRefusedRequest: Math.round(median(attackAloneRuns.map((r) => r.cpuUsPerRefusal))),
              refusedPerSecond: Math.round(median(attackAloneRuns.map((r) => r.attempts)) / SECONDS),
            },
          }),
      };
    });
    if (authMix.length > 0) scenarios.push({ name: E.name, description: E.description, ...summarise(authMix), ratioToBareProxy: 0, cpuRatioToBareProxy: 0 });

    const aa = comparisonResults[0]!;
    const verdict = {
      atTheSameTime: judgeAa(aa.atTheSameTime.efficiency.rounds),
      oneAfterTheOther: judgeAa(aa.oneAfterTheOther.efficiency.rounds),
    };
    const onRedis = comparisonResults.find((c) => c.subject === C.redis.name && c.baseline === B.name);
    const attacked = scenarios.find((s) => s.name === F.name);
    const cRedis = scenarios.find((s) => s.name === C.redis.name);
    const underAttack =
      attacked && cRedis
        ? {
            throughputRatio: Math.round(median(underAttackRatios) * 1000) / 1000,
            throughputRatioRounds: underAttackRatios.map((x) => Math.round(x * 1000) / 1000),
            p99Us: { withoutAttack: cRedis.p99Us, underAttack: attacked.p99Us },
            p99UsAtModerateRate: { withoutAttack: cRedis.atModerateRate?.p99Us, underAttack: attacked.atModerateRate?.p99Us },
            attackAnswers: mergeCounts(attackCounts),
            serverCpuUsPerRefusedAttackRequest: attacked.attackAlone?.serverCpuUsPerRefusedRequest,
            attackerAloneAnswers: mergeCounts(attackAloneRuns.map((run) => run.statuses)),
          }
        : undefined;
    // What card.created costs a card (issue 33): C on Redis, events on against off, alone and in pairs.
    const eventsOnOff = comparisonResults.find((c) => c.subject === C.redis.name && c.baseline === C.redisEventsOff.name);
    const cOff = scenarios.find((s) => s.name === C.redisEventsOff.name);
    const cardEvents =
      eventsOnOff && cRedis && cOff
        ? {
            endpointTakesCardCreated: CARD_EVENTS_DELIVERED,
            cpuUsPerCard: { on: cRedis.cpuUsPerRequest, off: cOff.cpuUsPerRequest, added: cRedis.cpuUsPerRequest - cOff.cpuUsPerRequest },
            efficiencyAtTheSameTime: eventsOnOff.atTheSameTime.efficiency.median,
            oneConnectionTaxUs: eventsOnOff.tax.taxP50Us,
            // One at a time (the pairs): a card's own, the store's background reads aside.
            storeCommandsPerCard: { on: eventsOnOff.tax.storeCommandsPerRequest, off: eventsOnOff.tax.baselineStoreCommandsPerRequest },
            storeRoundTripsPerCard: { on: eventsOnOff.tax.storeRoundTripsPerRequest, off: eventsOnOff.tax.baselineStoreRoundTripsPerRequest },
          }
        : undefined;
    const events = eventRuns.length > 0 ? { name: I.name, description: I.description, ...summariseEvents(eventRuns) } : undefined;
    // Issue 34's goals (and issue 33's for a card's event), each with the figure it is judged on.
    const goals = {
      aaTrusted: { value: verdict.atTheSameTime.within, atLeast: verdict.atTheSameTime.needed },
      // A lucky A/A on a busy machine is no licence: the servers must also have had their core.
      serversHadTheirCore: { value: aa.atTheSameTime.coreBusy.median, atLeast: BUSY_CORE },
      cpuRatioToBareProxy: { value: onRedis?.atTheSameTime.efficiency.median, atLeast: 0.75, aim: 1 },
      oneConnectionTaxUs: { value: onRedis?.tax.taxP50Us, atMost: 150 },
      // A card on Redis with events on, one at a time: the claim (SET NX GET, PEXPIRE), then its
      // record (a script running one SET) and its card.created event (a script: the dedupe check,
      // the sequence, the event, the log, its TTL, the dedupe key, the log's trim: 10 commands;
      // 2 more, a queue entry and its TTL, for an endpoint that takes card.created) sent together:
      // 14 commands (16), still 2 round trips. (4 in 2 before events.)
      storeCommandsPerCard: { value: (onRedis ?? eventsOnOff)?.tax.storeCommandsPerRequest, atMost: CARD_EVENTS_DELIVERED ? 16 : 14 },
      storeRoundTripsPerCard: { value: (onRedis ?? eventsOnOff)?.tax.storeRoundTripsPerRequest, atMost: 2 },
      // Issue 33: recording a card's event adds no round trip (events on less off, the pairs).
      cardEventAddedRoundTrips: {
        value:
          cardEvents?.storeRoundTripsPerCard.on !== undefined && cardEvents.storeRoundTripsPerCard.off !== undefined
            ? Math.round((cardEvents.storeRoundTripsPerCard.on - cardEvents.storeRoundTripsPerCard.off) * 10) / 10
            : undefined,
        atMost: 0,
      },
      underAttackThroughputRatio: { value: underAttack?.throughputRatio, atLeast: 0.8 },
      underAttackP99RatioAtModerateRate: {
        value:
          underAttack?.p99UsAtModerateRate.underAttack !== undefined && underAttack.p99UsAtModerateRate.withoutAttack
            ? Math.round((underAttack.p99UsAtModerateRate.underAttack / underAttack.p99UsAtModerateRate.withoutAttack) * 100) / 100
            : undefined,
        atMost: 3,
      },
      loginStoreRoundTrips: { value: loginCost?.roundTrips, atMost: 2 },
    };
    const goalMet = (goal: { value: number | undefined; atMost?: number; atLeast?: number }) =>
      goal.value !== undefined && (goal.atMost === undefined || goal.value <= goal.atMost) && (goal.atLeast === undefined || goal.value >= goal.atLeast);
    const goalsMet = Object.fromEntries(Object.entries(goals).map(([name, goal]) => [name, goalMet(goal)]));
    const output = {
      date: new Date().toISOString(),
      machine: {
        cpus: cpus().length,
        model: cpus()[0]?.model,
        node: process.version,
        pinned: pinning,
        loadAverage: { before: loadBefore.map((x) => +x.toFixed(2)), after: loadAfter.map((x) => +x.toFixed(2)) },
      },
      settings: {
        loadGenerator: GENERATOR,
        comparable: Boolean(WRK),
        rounds: ROUNDS,
        secondsPerRun: SECONDS,
        warmupSeconds: WARMUP_SECONDS,
        connections: CONNECTIONS,
        wrkThreads: WRK_THREADS,
        pairs: PAIRS,
        pairRepeats: PAIR_REPEATS,
        pairGapMs: PAIR_GAP_MS,
        moderateRate: MODERATE_RATE,
        fixedRateSeconds: FIXED_RATE_SECONDS,
        fixedRateRounds: FIXED_RATE_ROUNDS,
        ...(only && { only }),
      },
      yardstick: {
        aa: { band: AA_BAND, ...verdict, serversCoreShare: aa.atTheSameTime.coreBusy.median, coreShareAtLeast: BUSY_CORE },
        comparisons: comparisonResults,
      },
      goals: { ...goals, met: goalsMet },
      ...(loginCost && { login: { storeCommands: loginCost.commands, storeRoundTrips: loginCost.roundTrips, logins: LOGINS_COUNTED } }),
      ...(underAttack && { underAttack }),
      ...(cardEvents && { cardEvents }),
      ...(events && { events }),
      scenarios,
    };
    printYardstick(comparisonResults, verdict.atTheSameTime, verdict.oneAfterTheOther, loadBefore, loadAfter);
    printTable(scenarios);
    process.stdout.write(
      `\nGoals (issue 34): ${Object.entries(goals)
        .map(([name, goal]) => `${name} ${goal.value ?? '-'} ${goalsMet[name] ? 'met' : 'NOT met'}`)
        .join(', ')}\n`,
    );
    if (underAttack)
      process.stdout.write(
        `Under attack (F vs C on Redis, each round): throughput ${underAttack.throughputRatio}x (${underAttack.throughputRatioRounds.join('/')}), p99 at ${MODERATE_RATE}/s ${underAttack.p99UsAtModerateRate.withoutAttack} -> ${underAttack.p99UsAtModerateRate.underAttack} µs, server CPU per refused attack request ${underAttack.serverCpuUsPerRefusedAttackRequest} µs; attacker got ${JSON.stringify(underAttack.attackAnswers)}\n`,
      );
    if (cardEvents)
      process.stdout.write(
        `card.created (C on Redis, events on vs off${CARD_EVENTS_DELIVERED ? ', delivered' : ', recorded only'}): CPU per card ${cardEvents.cpuUsPerCard.on} vs ${cardEvents.cpuUsPerCard.off} µs alone (${cardEvents.cpuUsPerCard.added >= 0 ? '+' : ''}${cardEvents.cpuUsPerCard.added}), ` +
          `efficiency at the same time ${cardEvents.efficiencyAtTheSameTime}, one-connection tax ${cardEvents.oneConnectionTaxUs} µs; ` +
          `store per card one at a time ${cardEvents.storeCommandsPerCard.on ?? '-'} vs ${cardEvents.storeCommandsPerCard.off ?? '-'} commands in ${cardEvents.storeRoundTripsPerCard.on ?? '-'} vs ${cardEvents.storeRoundTripsPerCard.off ?? '-'} round trips\n`,
      );
    if (events)
      process.stdout.write(
        `Events (${I.name}, ${events.runs} run(s) at ${EVENTS_RATE}/s): recorded ${events.recordedPerSecond}/s, delivered ${events.deliveredPerSecond}/s; ` +
          `recorded to received p50 ${events.deliveryP50Us} µs, p99 ${events.deliveryP99Us} µs (max ${events.deliveryMaxUs}); connector POST p50 ${events.postP50Us} µs, p99 ${events.postP99Us} µs; ` +
          `gateway CPU ${events.cpuUsPerEvent} µs per event (recorded and delivered, core ${events.coreBusy}), store ${events.storeCommandsPerEvent} commands in ${events.storeRoundTripsPerEvent} round trips per event; ` +
          `refused ${events.refused}, delivered twice ${events.duplicates}, drained ${events.drainMs.map((ms) => (ms === null ? 'NOT within the guard' : `${ms} ms`)).join('/')} after the load\n`,
      );
    if (loginCost)
      process.stdout.write(`A login (${LOGINS_COUNTED} one at a time, Redis): ${loginCost.commands} store commands in ${loginCost.roundTrips} round trips\n`);
    if (!WRK) process.stdout.write('WARNING: measured with the Node generator: not comparable with wrk runs.\n');
    if (only) {
      process.stdout.write('subset run (BENCH_ONLY): no results file\n');
      return;
    }
    writeFileSync(join(root, 'bench', 'results.json'), `${JSON.stringify(output, null, 2)}\n`);
    process.stdout.write('wrote bench/results.json\n');
  } finally {
    await Promise.all(servers.map((server) => server.stop()));
    redis.stop();
    eventsOffRedis?.stop();
    cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * `-- --profile`: each comparison's baseline and subject alone on their core under wrk for
 * PROFILE_SECONDS, with V8's sampling profiler on in the server for exactly that window; the
 * profiles go to bench/profiles/, and each profile's items are printed in µs per request (the
 * items' share of the sampled busy time times the CPU per request measured over the window).
 */
async function profile(chosen: readonly Comparison[]): Promise<void> {
  const out = join(root, 'bench', 'profiles');
  mkdirSync(out, { recursive: true });
  const profiled = new Map<string, { items: ProfileItem[]; cpuUsPerRequest: number; mainUsPerRequest: number }>();
  for (const spec of chosen.flatMap((c) => [c.baseline, c.subject])) {
    if (profiled.has(spec.name)) continue;
    process.stderr.write(`bench: profiling ${spec.name} for ${PROFILE_SECONDS} s\n`);
    const file = join(out, `${spec.name}.cpuprofile`);
    await spec.server.startProfile();
    const mainBefore = threadCpuMicros(spec.server.process.pid)?.main;
    const [run] = await measure([spec], PROFILE_SECONDS);
    const mainAfter = threadCpuMicros(spec.server.process.pid)?.main;
    await spec.server.stopProfile(file);
    const requests = Math.max(1, run!.requests);
    const mainUsPerRequest = mainBefore !== undefined && mainAfter !== undefined ? (mainAfter - mainBefore) / requests : run!.cpuUsPerRequest;
    const window = {
      name: spec.name,
      requests: run!.requests,
      cpuUsPerRequest: Math.round(run!.cpuUsPerRequest),
      mainUsPerRequest: Math.round(mainUsPerRequest),
      coreBusy: +run!.coreBusy.toFixed(2),
      generator: GENERATOR,
      loadAverage: loadavg().map((x) => +x.toFixed(2)),
    };
    const items = profileItems(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, mainUsPerRequest);
    writeFileSync(join(out, `${spec.name}.json`), `${JSON.stringify({ ...window, items }, null, 2)}\n`);
    profiled.set(spec.name, { items, cpuUsPerRequest: run!.cpuUsPerRequest, mainUsPerRequest });
    printProfileItems(spec.name, items, window);
  }
  for (const comparison of chosen.slice(1)) printItemDifference(comparison.baseline.name, comparison.subject.name, profiled);
  process.stdout.write(`profiles and their windows in ${out}\n`);
}

/** Side by side, item by item, what the subject spends per request over what the baseline does. */
function printItemDifference(
  baseline: string,
  subject: string,
  profiled: Map<string, { items: ProfileItem[]; cpuUsPerRequest: number; mainUsPerRequest: number }>,
): void {
  const [b, s] = [profiled.get(baseline), profiled.get(subject)];
  if (!b || !s) return;
  const usOf = (items: ProfileItem[], item: string) => items.find((x) => x.item === item)?.usPerRequest ?? 0;
  const otherThreads = 'other threads (V8 GC helpers, libuv pool: file writes)';
  const names = [...new Set([...s.items, ...b.items].map((x) => x.item))];
  const rows = names
    .map((item) => [item, usOf(b.items, item), usOf(s.items, item)] as const)
    .concat([[otherThreads, b.cpuUsPerRequest - b.mainUsPerRequest, s.cpuUsPerRequest - s.mainUsPerRequest]])
    .sort((x, y) => y[2] - y[1] - (x[2] - x[1]));
  process.stdout.write(`\n${subject} over ${baseline}, µs of CPU per request (${s.cpuUsPerRequest.toFixed(0)} against ${b.cpuUsPerRequest.toFixed(0)}):\n`);
  table(
    ['item', baseline, subject, 'difference'],
    rows.map(([item, bu, su]) => [item, bu.toFixed(1), su.toFixed(1), `${su - bu >= 0 ? '+' : ''}${(su - bu).toFixed(1)}`]),
  );
}

const mergeCounts = (runs: Record<string, number>[]) =>
  runs.reduce<Record<string, number>>((sum, counts) => {
    for (const [status, n] of Object.entries(counts)) sum[status] = (sum[status] ?? 0) + n;
    return sum;
  }, {});

const range = (s: Spread, digits: number) => `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}-${s.max.toFixed(digits)})`;

function printYardstick(
  results: readonly ComparisonResult[],
  together: ReturnType<typeof judgeAa>,
  apart: ReturnType<typeof judgeAa>,
  before: number[],
  after: number[],
): void {
  const rows = results.map((r) => [
    r.name,
    range(r.atTheSameTime.efficiency, 2),
    r.atTheSameTime.efficiency.rounds.map((x) => x.toFixed(2)).join(' '),
    `${r.atTheSameTime.baselineCpuUsPerRequest.median} / ${r.atTheSameTime.subjectCpuUsPerRequest.median}`,
    r.atTheSameTime.coreBusy.median.toFixed(2),
    range(r.oneAfterTheOther.efficiency, 2),
    `${r.tax.repeats.map((x) => `${x.taxP50Us >= 0 ? '+' : ''}${x.taxP50Us}`).join(' ')} / ${r.tax.taxP99Us >= 0 ? '+' : ''}${r.tax.taxP99Us}`,
    `${r.tax.repeats[0]?.baseline.p50Us ?? '-'}`,
  ]);
  const header = ['comparison', 'CPU eff. same time', 'rounds', 'CPU µs/req base/subj', 'core', 'one after other', '1-conn tax p50s / p99 µs', 'base p50'];
  process.stdout.write(
    `\nYardstick: ${GENERATOR}; ${ROUNDS} rounds of ${SECONDS} s; servers on CPU 0, load on CPU 1 (pinned: ${pinning}); ` +
      `load average before ${before.map((x) => x.toFixed(2)).join(' ')}, after ${after.map((x) => x.toFixed(2)).join(' ')}\n` +
      "CPU efficiency = baseline CPU per request / subject CPU per request (1.0 = the baseline's cost); tax = subject - baseline, one connection, interleaved pairs\n",
  );
  table(header, rows);
  const core = results[0]?.atTheSameTime.coreBusy.median ?? 0;
  if (core < BUSY_CORE)
    process.stdout.write(
      `The servers had ${core.toFixed(2)} of CPU 0 between them in the A/A (a quiet machine gives them about 0.95): other work ran on their core, and no ratio of this run is to be read.\n`,
    );
  const say = (what: string, v: ReturnType<typeof judgeAa>) =>
    `${what}: ${v.within} of ${v.rounds} rounds within ${AA_BAND.low}-${AA_BAND.high} (needs ${v.needed}): ${v.trusted ? 'trusted' : 'NOT trusted (the machine was too noisy for this run to judge a goal)'}`;
  process.stdout.write(`A/A ${say('at the same time', together)}; ${say('one after the other', apart)}\n\n`);
}

function printTable(results: readonly (Measured & { name: string; ratioToBareProxy: number; cpuRatioToBareProxy: number })[]): void {
  const rows = results.map((r) => [
    r.name,
    String(r.rps),
    String(r.p50Us),
    String(r.p99Us),
    String(r.cpuUsPerRequest),
    r.serverCoreBusy.toFixed(2),
    r.ratioToBareProxy.toFixed(2),
    r.cpuRatioToBareProxy.toFixed(2),
    r.storeCommandsPerRequest === undefined ? '' : String(r.storeCommandsPerRequest),
    r.storeRoundTripsPerRequest === undefined ? '' : String(r.storeRoundTripsPerRequest),
    String(r.non2xx + r.errors),
  ]);
  process.stdout.write('Each scenario alone on its core (medians of its runs; ratios to its bare-proxy load alone):\n');
  table(['scenario', 'req/s', 'p50 µs', 'p99 µs', 'CPU µs/req', 'core', 'x bare', 'CPU x bare', 'store cmds/req', 'store reads/req', 'bad'], rows);
  const uneven = results.filter(
    (r) => r.rounds.length > 1 && Math.max(...r.rounds.map((x) => x.cpuUsPerRequest)) > 1.3 * Math.min(...r.rounds.map((x) => x.cpuUsPerRequest)),
  );
  if (uneven.length > 0)
    process.stdout.write(
      `runs more than 30 % apart in CPU per request: ${uneven.map((r) => `${r.name} ${r.rounds.map((x) => x.cpuUsPerRequest).join('/')}`).join(', ')}\n`,
    );
}

function table(header: string[], rows: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) => cells.map((cell, i) => cell.padEnd(widths[i]!)).join('  ');
  process.stdout.write(`${line(header)}\n${widths.map((w) => '-'.repeat(w)).join('  ')}\n${rows.map(line).join('\n')}\n`);
}

if (!existsSync(join(distBench, 'serve.js'))) throw new Error('run through `npm run bench` (it builds dist/ first)');
await main();
