import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchingRedis, createRedisClient, createStoreClient, waitUntilReady } from '../../src/store/redis/redis-client.js';
import { freePort } from '../support/ports.js';
import { requireRedisUrl, uniquePrefix } from '../support/redis.js';
import { recordSends } from '../support/redis-sends.js';
import { HANG_GUARD_MS } from '../support/wait.js';

/**
 * The store's connection writes the commands of one turn of the event loop together (issue
 * 20): what ioredis's auto-pipelining did, without its pipeline object and second promise per
 * command. Counted at the real socket to a real Redis (recordSends: each send to the kernel and
 * the commands in it).
 */
describe('batched writes to Redis', () => {
  let client: BatchingRedis;
  const prefix = uniquePrefix('batched-writes');
  let sent: ReturnType<typeof recordSends>;

  beforeAll(async () => {
    client = createRedisClient({ url: requireRedisUrl(), commandTimeoutMs: 1000, connectTimeoutMs: 5000 });
    expect(await waitUntilReady(client, HANG_GUARD_MS)).toBe(true);
    sent = recordSends(client);
  });

  afterAll(async () => {
    await client.del(`${prefix}n`, `${prefix}m`);
    client.disconnect();
  });

  it('sends the commands of one turn in one write, in the order they were made, and a MULTI made meanwhile with them', async () => {
    sent.clear();
    const counts = Array.from({ length: 10 }, () => client.incr(`${prefix}n`));
    const transaction = client.multi().incr(`${prefix}n`).incr(`${prefix}m`).exec();
    const last = client.incr(`${prefix}n`);
    expect(client.stream.writableCorked).toBe(1);
    expect(await Promise.all(counts)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(await transaction).toEqual([
      [null, 11],
      [null, 1],
    ]);
    expect(await last).toBe(12);
    // One send: 10 INCRs, the MULTI (its commands in order), and the last INCR.
    expect(sent.sends).toEqual([[...Array<string>(10).fill('incr'), 'multi', 'incr', 'incr', 'exec', 'incr']]);
    expect(client.stream.writableCorked).toBe(0);
  });

  it('sends each later turn in a write of its own', async () => {
    sent.clear();
    expect(await client.incr(`${prefix}m`)).toBe(2);
    await new Promise((resolve) => setImmediate(resolve));
    expect(await client.incr(`${prefix}m`)).toBe(3);
    expect(sent.sends).toEqual([['incr'], ['incr']]);
  });

  it('is the connection of the standalone and the Sentinel topologies (a Cluster auto-pipelines its own node connections)', async () => {
    const nodes = [{ host: '127.0.0.1', port: await freePort() }];
    const options = { commandTimeoutMs: 300, connectTimeoutMs: 300 };
    const standalone = createStoreClient({ ...options, target: { topology: 'standalone', url: requireRedisUrl() } });
    const sentinel = createStoreClient({ ...options, target: { topology: 'sentinel', masterName: 'nowhere', nodes } });
    const cluster = createStoreClient({ ...options, target: { topology: 'cluster', nodes } });
    try {
      expect(standalone).toBeInstanceOf(BatchingRedis);
      expect(sentinel).toBeInstanceOf(BatchingRedis);
      expect(cluster.options.enableAutoPipelining).toBe(true);
    } finally {
      for (const each of [standalone, sentinel, cluster]) each.disconnect();
    }
  });
});
