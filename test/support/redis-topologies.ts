import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { expect } from 'vitest';
import { createStoreClient, type HostPort, type RedisTarget, type StoreClient } from '../../src/store/redis/redis-client.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { freePort } from './ports.js';
import { killRedisServer, startRedisServer } from '../../tools/launch/redis-server.js';
import { TEST_COMMAND_TIMEOUT_MS } from './redis.js';
import { HANG_GUARD_MS } from './wait.js';

/**
 * Real Redis topologies for the topology and failover suites: redis-server processes on free
 * loopback ports with their files in a temporary folder, started once per test file and killed
 * in its afterAll. Failure detection is shortened (Sentinel's down-after-milliseconds and the
 * Cluster node timeout are 1 s) so that a failover fits in a test; production keeps its own.
 *
 * A missing redis-server is an error, never a skip: these suites exist to prove the topologies.
 */

const HOST = '127.0.0.1';
/** Failure detection used by both topologies (ms). */
export const NODE_TIMEOUT_MS = 1000;

/** Every child this process started, killed synchronously if the worker exits without afterAll. */
const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) {
    try {
      child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
});

export class RedisProcess {
  #child: ChildProcess | undefined;
  constructor(
    readonly port: number,
    private readonly args: readonly string[],
  ) {}

  get address(): string {
    return `${HOST}:${this.port}`;
  }

  get url(): string {
    return `redis://${HOST}:${this.port}`;
  }

  get running(): boolean {
    return this.#child !== undefined && this.#child.exitCode === null && this.#child.signalCode === null;
  }

  get pid(): number {
    const pid = this.#child?.pid;
    if (pid === undefined) throw new Error(`redis on ${this.port} has no process`);
    return pid;
  }

  async start(): Promise<void> {
    const { child } = await startRedisServer(this.args, this.url);
    children.add(child);
    child.once('exit', () => children.delete(child));
    this.#child = child;
  }

  /** SIGKILL: no shutdown, no last words to replicas or clients (a crashed host). */
  async kill(): Promise<void> {
    if (this.#child) await killRedisServer(this.#child);
  }

  /** A connection for test assertions and administration (not the store's). */
  admin(): Redis {
    const client = new Redis({ host: HOST, port: this.port, maxRetriesPerRequest: 0, connectTimeout: 1000, retryStrategy: () => null, lazyConnect: true });
    client.on('error', () => undefined);
    return client;
  }

  /** One command on a short-lived connection. */
  async call(...args: (string | number)[]): Promise<unknown> {
    const client = this.admin();
    try {
      await client.connect();
      const [command, ...rest] = args;
      return await client.call(String(command), ...rest);
    } finally {
      client.disconnect();
    }
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // not yet
    }
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

/** Options every data node gets: loopback only, no persistence (the tests want speed, and a killed node's data is gone either way). */
// A replica's first sync starts at once (the default waits 5 s for more replicas to join it).
const dataNodeArgs = (port: number, dir: string): string[] => [
  '--port',
  String(port),
  '--bind',
  HOST,
  '--save',
  '',
  '--appendonly',
  'no',
  '--dir',
  dir,
  '--repl-diskless-sync-delay',
  '0',
];

/** Parses `INFO` text into a map. */
export function parseInfo(text: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const at = line.indexOf(':');
    if (at > 0 && !line.startsWith('#')) map.set(line.slice(0, at), line.slice(at + 1));
  }
  return map;
}

export interface Topology {
  readonly kind: 'standalone' | 'sentinel' | 'cluster';
  /** Every data node (masters and replicas). */
  readonly nodes: readonly RedisProcess[];
  stop(): Promise<void>;
}

export interface StandaloneTopology extends Topology {
  readonly kind: 'standalone';
  readonly server: RedisProcess;
  readonly url: string;
  /** SIGKILL, then a new, empty server on the same port (what a single Redis without persistence gives). */
  restart(): Promise<void>;
}

export async function startStandalone(): Promise<StandaloneTopology> {
  const dir = mkdtempSync(join(tmpdir(), 'gw-redis-standalone-'));
  const port = await freePort();
  const real = new RedisProcess(port, dataNodeArgs(port, dir));
  await real.start();
  return {
    kind: 'standalone',
    server: real,
    nodes: [real],
    url: real.url,
    async restart() {
      await real.kill();
      await real.start();
    },
    async stop() {
      await real.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface SentinelTopology extends Topology {
  readonly kind: 'sentinel';
  readonly masterName: string;
  readonly sentinels: readonly RedisProcess[];
  /** `host:port` of each sentinel, as `store.redis.sentinel.nodes` takes them. */
  readonly sentinelNodes: readonly HostPort[];
  /** The data node the sentinels currently name as master. */
  master(): Promise<RedisProcess>;
  /** Waits until the sentinels name a master other than `previous` and it accepts writes. */
  waitForNewMaster(previous: RedisProcess, timeoutMs?: number): Promise<RedisProcess>;
}

/** 1 master, 2 replicas, 3 sentinels (quorum 2), failure detected after 1 s. */
export async function startSentinel(masterName = 'gwmaster'): Promise<SentinelTopology> {
  const dir = mkdtempSync(join(tmpdir(), 'gw-redis-sentinel-'));
  const ports = await distinctPorts(6);
  const [masterPort, ...rest] = ports as [number, ...number[]];
  const master = new RedisProcess(masterPort, dataNodeArgs(masterPort, dir));
  const replicas = rest.slice(0, 2).map((port) => new RedisProcess(port, [...dataNodeArgs(port, dir), '--replicaof', HOST, String(masterPort)]));
  const sentinels = rest.slice(2, 5).map((port) => {
    const file = join(dir, `sentinel-${port}.conf`);
    // Sentinel rewrites its own config file: it must be a writable file of its own.
    writeFileSync(
      file,
      [
        `port ${port}`,
        `bind ${HOST}`,
        `dir ${dir}`,
        `sentinel monitor ${masterName} ${HOST} ${masterPort} 2`,
        `sentinel down-after-milliseconds ${masterName} ${NODE_TIMEOUT_MS}`,
        `sentinel failover-timeout ${masterName} 5000`,
        `sentinel parallel-syncs ${masterName} 2`,
        '',
      ].join('\n'),
    );
    return new RedisProcess(port, [file, '--sentinel']);
  });
  const nodes = [master, ...replicas];
  const stop = async () => {
    await Promise.all([...nodes, ...sentinels].map((node) => node.kill()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await Promise.all(nodes.map((node) => node.start()));
    await Promise.all(sentinels.map((sentinel) => sentinel.start()));
    // A failover needs every sentinel to know the replicas and a majority of its peers (they
    // discover each other through the master's hello channel, every 2 s).
    await waitUntil(
      'sentinels to know both replicas and each other',
      async () => {
        for (const sentinel of sentinels) {
          const known = (await sentinel.call('SENTINEL', 'SENTINELS', masterName)) as unknown[];
          const replicasSeen = (await sentinel.call('SENTINEL', 'REPLICAS', masterName)) as unknown[];
          if (known.length < 2 || replicasSeen.length < 2) return false;
        }
        return true;
      },
      20_000,
    );
    await waitForReplicasOnline(master, 2);
  } catch (error) {
    await stop();
    throw error;
  }

  const byPort = (port: number) => nodes.find((node) => node.port === port);
  const named = async (): Promise<RedisProcess> => {
    for (const sentinel of sentinels) {
      if (!sentinel.running) continue;
      try {
        const [, port] = (await sentinel.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', masterName)) as [string, string];
        const node = byPort(Number(port));
        if (node) return node;
      } catch {
        // ask the next one
      }
    }
    throw new Error('no sentinel names a master');
  };
  return {
    kind: 'sentinel',
    masterName,
    nodes,
    sentinels,
    sentinelNodes: sentinels.map((sentinel) => ({ host: HOST, port: sentinel.port })),
    master: named,
    async waitForNewMaster(previous, timeoutMs = 20_000) {
      let found: RedisProcess | undefined;
      await waitUntil(
        'the sentinels to promote a new master',
        async () => {
          const current = await named();
          if (current === previous) return false;
          const role = parseInfo(String(await current.call('INFO', 'replication'))).get('role');
          found = current;
          return role === 'master';
        },
        timeoutMs,
      );
      return found!;
    },
    stop,
  };
}

async function waitForReplicasOnline(master: RedisProcess, count: number): Promise<void> {
  await waitUntil(
    `${count} replicas online at ${master.address}`,
    async () => {
      const info = parseInfo(String(await master.call('INFO', 'replication')));
      let online = 0;
      for (const [key, value] of info) if (/^slave\d+$/.test(key) && value.includes('state=online')) online += 1;
      return online >= count;
    },
    20_000,
  );
}

export interface ClusterShard {
  master: RedisProcess;
  replicas: RedisProcess[];
  /** Slot ranges `[start, end]` the master serves. */
  slots: [number, number][];
}

export interface ClusterTopology extends Topology {
  readonly kind: 'cluster';
  /** `host:port` of every node, as `store.redis.cluster.nodes` takes them. */
  readonly startupNodes: readonly HostPort[];
  /** The shards as the cluster sees them now (asked from a live node). */
  shards(): Promise<ClusterShard[]>;
  /** The shard serving `slot` now. */
  shardOf(slot: number): Promise<ClusterShard>;
  /** Waits until `slot` is served by a live master other than `previous` and the cluster is ok. */
  waitForNewMaster(slot: number, previous: RedisProcess, timeoutMs?: number): Promise<RedisProcess>;
}

/**
 * 3 masters and 3 replicas made with `redis-cli --cluster create`, node timeout 1 s. A shard
 * that loses its master stops serving its slots until its replica is promoted; with
 * `cluster-require-full-coverage no` the other shards keep serving meanwhile (what the README
 * recommends).
 */
export async function startCluster(): Promise<ClusterTopology> {
  const dir = mkdtempSync(join(tmpdir(), 'gw-redis-cluster-'));
  // Each node needs a client port and a cluster-bus port (cluster-port, Redis 7): both free.
  const ports = await distinctPorts(12);
  const nodes = Array.from({ length: 6 }, (_, index) => {
    const port = ports[index]!;
    const busPort = ports[index + 6]!;
    return new RedisProcess(port, [
      ...dataNodeArgs(port, dir),
      '--cluster-enabled',
      'yes',
      '--cluster-port',
      String(busPort),
      '--cluster-config-file',
      join(dir, `nodes-${port}.conf`),
      '--cluster-node-timeout',
      String(NODE_TIMEOUT_MS),
      '--cluster-require-full-coverage',
      'no',
    ]);
  });
  const stop = async () => {
    await Promise.all(nodes.map((node) => node.kill()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await Promise.all(nodes.map((node) => node.start()));
    await formCluster(nodes.slice(0, 3), nodes.slice(3), ports.slice(6, 12));
    for (const shard of await readShards(nodes)) await waitForReplicasOnline(shard.master, 1);
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    kind: 'cluster',
    nodes,
    startupNodes: nodes.map((node) => ({ host: HOST, port: node.port })),
    shards: () => readShards(nodes),
    async shardOf(slot) {
      const shard = (await readShards(nodes)).find((candidate) => candidate.slots.some(([start, end]) => slot >= start && slot <= end));
      if (!shard) throw new Error(`no shard serves slot ${slot}`);
      return shard;
    },
    async waitForNewMaster(slot, previous, timeoutMs = 20_000) {
      let found: RedisProcess | undefined;
      await waitUntil(
        `a new master for slot ${slot}`,
        async () => {
          const shard = (await readShards(nodes)).find((candidate) => candidate.slots.some(([start, end]) => slot >= start && slot <= end));
          if (!shard || shard.master === previous || !shard.master.running) return false;
          found = shard.master;
          return true;
        },
        timeoutMs,
      );
      return found!;
    },
    stop,
  };
}

/**
 * What `redis-cli --cluster create --cluster-replicas 1` does, without its one-second polls:
 * slots split in three, distinct config epochs, one MEET per node, then each replica follows
 * its master. About 2 s instead of 10.
 */
async function formCluster(masters: RedisProcess[], replicas: RedisProcess[], busPorts: number[]): Promise<void> {
  const all = [...masters, ...replicas];
  const per = Math.floor(16384 / masters.length);
  await Promise.all(
    masters.map(async (master, index) => {
      const start = index * per;
      const end = index === masters.length - 1 ? 16383 : start + per - 1;
      await master.call('CLUSTER', 'ADDSLOTSRANGE', start, end);
      await master.call('CLUSTER', 'SET-CONFIG-EPOCH', index + 1);
    }),
  );
  const first = all[0]!;
  for (const [index, node] of all.entries()) if (index > 0) await first.call('CLUSTER', 'MEET', HOST, node.port, busPorts[index]!);
  await waitUntil(
    'every node to know the other five',
    async () => {
      for (const node of all) if (parseInfo(String(await node.call('CLUSTER', 'INFO'))).get('cluster_known_nodes') !== String(all.length)) return false;
      return true;
    },
    20_000,
  );
  for (const [index, replica] of replicas.entries()) {
    const masterId = String(await masters[index]!.call('CLUSTER', 'MYID'));
    // A replica can only follow a master it already knows about: retry until gossip got there.
    await waitUntil(
      `${replica.address} to replicate ${masters[index]!.address}`,
      async () => (await replica.call('CLUSTER', 'REPLICATE', masterId)) === 'OK',
      10_000,
    );
  }
  await waitUntil(
    'every node to report cluster_state:ok and see 3 masters with a replica each',
    async () => {
      for (const node of all) if (parseInfo(String(await node.call('CLUSTER', 'INFO'))).get('cluster_state') !== 'ok') return false;
      const shards = await readShards(all);
      return shards.length === masters.length && shards.every((shard) => shard.replicas.length === 1);
    },
    30_000,
  );
}

/** CLUSTER SHARDS from the first live node that answers. */
async function readShards(nodes: readonly RedisProcess[]): Promise<ClusterShard[]> {
  for (const node of nodes) {
    if (!node.running) continue;
    let reply: unknown;
    try {
      reply = await node.call('CLUSTER', 'SHARDS');
    } catch {
      continue;
    }
    const shards: ClusterShard[] = [];
    for (const entry of reply as unknown[][]) {
      const fields = pairs(entry);
      const slotList = (fields.get('slots') as (number | string)[]).map(Number);
      const slots: [number, number][] = [];
      for (let i = 0; i + 1 < slotList.length; i += 2) slots.push([slotList[i]!, slotList[i + 1]!]);
      let master: RedisProcess | undefined;
      const replicas: RedisProcess[] = [];
      for (const rawNode of fields.get('nodes') as unknown[][]) {
        const info = pairs(rawNode);
        const process = nodes.find((candidate) => candidate.port === Number(info.get('port')));
        // A fresh replica reads `loading` until its master's replication offset moves: still a replica.
        if (!process || info.get('health') === 'failed') continue;
        if (info.get('role') === 'master') master = process;
        else replicas.push(process);
      }
      if (master && slots.length > 0) shards.push({ master, replicas, slots });
    }
    return shards;
  }
  throw new Error('no cluster node answers');
}

function pairs(list: unknown[]): Map<string, unknown> {
  const map = new Map<string, unknown>();
  for (let i = 0; i + 1 < list.length; i += 2) map.set(String(list[i]), list[i + 1]);
  return map;
}

/** `count` free loopback ports, all different. */
async function distinctPorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}

/** CRC16/XMODEM, Redis Cluster's key hash: the slot a key (or its {hash tag}) lands in. */
export function keySlot(key: string): number {
  const open = key.indexOf('{');
  if (open !== -1) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) key = key.slice(open + 1, close);
  }
  let crc = 0;
  for (const byte of Buffer.from(key, 'utf8')) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit += 1) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}

/** The `store.redis` target naming a topology, as the config loader builds it. */
export function targetOf(topology: StandaloneTopology | SentinelTopology | ClusterTopology): RedisTarget {
  switch (topology.kind) {
    case 'standalone':
      return { topology: 'standalone', url: topology.url };
    case 'sentinel':
      return { topology: 'sentinel', masterName: topology.masterName, nodes: topology.sentinelNodes };
    case 'cluster':
      return { topology: 'cluster', nodes: topology.startupNodes };
  }
}

/** The raw `store` config section for a topology (what an operator writes, D35). */
export function storeSection(
  topology: StandaloneTopology | SentinelTopology | ClusterTopology,
  keyPrefix: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  const hostPort = (node: HostPort) => `${node.host}:${node.port}`;
  const where =
    topology.kind === 'standalone'
      ? { url: topology.url }
      : topology.kind === 'sentinel'
        ? { sentinel: { masterName: topology.masterName, nodes: topology.sentinelNodes.map(hostPort) } }
        : { cluster: { nodes: topology.startupNodes.map(hostPort) } };
  return { kind: 'redis', redis: { ...where, keyPrefix, ...extra } };
}

/**
 * A RedisStore on a topology, ready (or an error after the hang guard). Its command deadline is
 * generous ({@link TEST_COMMAND_TIMEOUT_MS}) so that a busy machine cannot turn a slow answer
 * into a refusal; a test about the deadline itself passes `commandTimeoutMs` and makes Redis
 * not answer (SIGSTOP, CLIENT PAUSE), so its outcome does not depend on load.
 * Closing it closes its client; the topology's keys die with the topology.
 */
export async function openTopologyStore(
  topology: StandaloneTopology | SentinelTopology | ClusterTopology,
  options: { prefix?: string; replicasToAck?: number; commandTimeoutMs?: number } = {},
): Promise<RedisStore> {
  return (await openTopologyStoreWithClient(topology, options)).store;
}

/** {@link openTopologyStore}, with the store's client and key prefix (to look inside Redis). */
export async function openTopologyStoreWithClient(
  topology: StandaloneTopology | SentinelTopology | ClusterTopology,
  options: { prefix?: string; replicasToAck?: number; commandTimeoutMs?: number } = {},
): Promise<{ store: RedisStore; client: StoreClient; prefix: string }> {
  const commandTimeoutMs = options.commandTimeoutMs ?? TEST_COMMAND_TIMEOUT_MS;
  const client = createStoreClient({ target: targetOf(topology), commandTimeoutMs, connectTimeoutMs: 5_000 });
  const prefix = options.prefix ?? `test:${randomUUID().slice(0, 8)}:`;
  const store = new RedisStore(client, prefix, {
    commandTimeoutMs,
    deadlineMs: commandTimeoutMs + 1000,
    replicasToAck: options.replicasToAck ?? 0,
  });
  const deadline = performance.now() + HANG_GUARD_MS;
  for (;;) {
    try {
      await store.ping();
      return { store, client, prefix };
    } catch (error) {
      if (performance.now() > deadline) {
        await store.close();
        throw new Error(`hung: the ${topology.kind} store did not become ready within ${HANG_GUARD_MS} ms: ${(error as Error).message}`, { cause: error });
      }
      await sleep(100);
    }
  }
}

/** Polls PING until `store` answers, as an assertion (10 s at most): a store built from config connects in the background. */
export async function waitUntilPingable(store: RedisStore, timeoutMs = 10_000): Promise<void> {
  await expect
    .poll(
      async () =>
        store.ping().then(
          () => true,
          () => false,
        ),
      { timeout: timeoutMs },
    )
    .toBe(true);
}
