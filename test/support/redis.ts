import { randomUUID } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';
import { inject } from 'vitest';
import { createRedisClient, waitUntilReady } from '../../src/store/redis/redis-client.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import './provided-context.js';

/** The Redis found or started by global-setup.ts; a missing one fails the suite, never skips it. */
export function requireRedisUrl(): string {
  const url = inject('redisUrl');
  if (!url) throw new Error('Redis is required for this suite: set REDIS_URL or install redis-server');
  return url;
}

/** A key prefix no other test file (or other run of this one) can share. */
export function uniquePrefix(label: string): string {
  return `test:${label}:${process.pid}:${randomUUID().slice(0, 8)}:`;
}

/** Escapes glob metacharacters so SCAN MATCH treats the prefix literally. */
function globLiteral(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/** Every key under `prefix`, found with SCAN (never KEYS). */
export async function keysWithPrefix(client: Redis, prefix: string): Promise<string[]> {
  const found = new Set<string>();
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${globLiteral(prefix)}*`, 'COUNT', 500);
    for (const key of keys) found.add(key);
    cursor = next;
  } while (cursor !== '0');
  return [...found];
}

export async function deleteKeysWithPrefix(client: Redis, prefix: string): Promise<number> {
  const keys = await keysWithPrefix(client, prefix);
  let deleted = 0;
  for (let i = 0; i < keys.length; i += 500) deleted += await client.unlink(...keys.slice(i, i + 500));
  return deleted;
}

/**
 * A look inside the Redis of a store (test/store/store-contract.ts's StoreInspector): each command
 * goes through a script on the key, which a Cluster client sends to the key's shard.
 */
export function inspectorOf(client: Redis | Cluster, prefix: string) {
  return {
    prefix,
    memoryUsage: async (key: string, options: { allSamples?: boolean } = {}): Promise<number> =>
      Number(await client.eval("return redis.call('MEMORY', 'USAGE', KEYS[1], 'SAMPLES', ARGV[1])", 1, key, options.allSamples ? '0' : '5')),
    pttl: async (key: string): Promise<number> => Number(await client.eval("return redis.call('PTTL', KEYS[1])", 1, key)),
    remove: async (key: string): Promise<void> => {
      await client.eval("return redis.call('DEL', KEYS[1])", 1, key);
    },
    zrange: async (key: string): Promise<string[]> => (await client.eval("return redis.call('ZRANGE', KEYS[1], 0, -1)", 1, key)) as string[],
    setRaw: async (key: string, value: string, ttlMs: number): Promise<void> => {
      await client.eval("return redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])", 1, key, value, String(ttlMs));
    },
    /** Scanned on every master (a Cluster's shards each), never with KEYS. */
    keysOf: async (tag: string): Promise<string[]> => {
      const nodes = client instanceof Cluster ? client.nodes('master') : [client];
      const found = await Promise.all(nodes.map((node) => keysWithPrefix(node, prefix)));
      return found
        .flat()
        .filter((key) => key.includes(`{${tag}}`))
        .sort();
    },
  };
}

/** An idempotency record as Redis keeps it, field by field (src/store/redis/idempotency-values.ts). */
export interface StoredIdempotency {
  state: 'completed' | 'pending' | 'released' | undefined;
  /** Every field of the record: `exp` and `record` (completed), `owner`, `leaseExp`, ... (a claim). */
  fields: Record<string, string>;
}

/** Reads the idempotency record under `key` (the string `c|exp|record`, `p|{...}` or `r|{...}`). */
export async function readIdempotency(client: Redis, key: string): Promise<StoredIdempotency> {
  const value = await client.get(key);
  if (value === null) return { state: undefined, fields: {} };
  if (value.startsWith('c|')) {
    const at = value.indexOf('|', 2);
    return { state: 'completed', fields: { exp: value.slice(2, at), record: value.slice(at + 1) } };
  }
  const fields = JSON.parse(value.slice(2)) as Record<string, string>;
  return { state: value.startsWith('p|') ? 'pending' : 'released', fields };
}

export interface TestRedisStore {
  store: RedisStore;
  client: Redis;
  prefix: string;
  /** Deletes every key under the prefix, then closes the store (and its client). */
  cleanup(): Promise<void>;
}

/**
 * The command deadline of store clients in tests: generous, so that a busy machine makes a
 * command slower but never a refusal. Tests about the deadline itself set their own and make
 * Redis not answer (a paused or stopped server), so their outcome does not depend on load.
 */
export const TEST_COMMAND_TIMEOUT_MS = 5_000;

/** A ready client and store on the shared test Redis under `prefix`, with the generous test deadline. */
async function openStore(url: string, prefix: string): Promise<{ client: Redis; store: RedisStore }> {
  const client = createRedisClient({ url, commandTimeoutMs: TEST_COMMAND_TIMEOUT_MS, connectTimeoutMs: 5_000 });
  client.on('error', () => undefined);
  const store = new RedisStore(client, prefix, { commandTimeoutMs: TEST_COMMAND_TIMEOUT_MS, deadlineMs: TEST_COMMAND_TIMEOUT_MS + 2_000 });
  if (!(await waitUntilReady(client, 5_000))) {
    client.disconnect();
    throw new Error(`Redis at ${url} did not become ready within 5 s`);
  }
  return { client, store };
}

/**
 * Another replica's own client and store on the shared test Redis, under the prefix of a store
 * from createTestRedisStore (whose cleanup deletes the keys), with the same generous deadline.
 * The caller closes it.
 */
export async function openReplicaStore(prefix: string): Promise<RedisStore> {
  return (await openStore(requireRedisUrl(), prefix)).store;
}

/** A RedisStore on the shared test Redis, namespaced per call, with the generous test deadline. */
export async function createTestRedisStore(label: string): Promise<TestRedisStore> {
  const url = requireRedisUrl();
  const prefix = uniquePrefix(label);
  const { client, store } = await openStore(url, prefix);
  return {
    store,
    client,
    prefix,
    async cleanup() {
      try {
        if (client.status === 'ready') {
          await deleteKeysWithPrefix(client, prefix);
        } else {
          // The test closed or broke the store's client: clean up through a plain connection.
          const plain = new Redis(url, { maxRetriesPerRequest: 1, connectTimeout: 1_000 });
          plain.on('error', () => undefined);
          try {
            await deleteKeysWithPrefix(plain, prefix);
          } finally {
            plain.disconnect();
          }
        }
      } finally {
        await store.close();
      }
    },
  };
}

export { freePort as unusedPort } from './ports.js';
