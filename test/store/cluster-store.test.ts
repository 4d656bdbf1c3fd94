import { randomUUID } from 'node:crypto';
import { Cluster } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createStore } from '../../src/store/create-store.js';
import type { RedisStore } from '../../src/store/redis/redis-store.js';
import type { StoreEvent } from '../../src/store/store-types.js';
import { testConfig } from '../support/gateway-fixture.js';
import {
  NODE_TIMEOUT_MS,
  keySlot,
  openTopologyStore,
  openTopologyStoreWithClient,
  startCluster,
  storeSection,
  type ClusterShard,
  type RedisProcess,
  waitUntilPingable,
} from '../support/redis-topologies.js';
import { sampleRecord } from './store-contract.js';
import { waitFor } from '../support/wait.js';
import { replicasToAckCostTest, topologySuites } from './topology-suites.js';

/**
 * D35 on Redis Cluster: 3 masters with a replica each, real redis-server processes on loopback,
 * started once for this file. The store contract, the token lifecycle and the card idempotency
 * suites run unchanged on it; then what only a Cluster has: keys spread over shards with each
 * script's keys in one slot, rate-limiter-flexible on a Cluster client, and WAIT sent to the
 * shard that holds the record.
 */

const cluster = topologySuites('cluster', startCluster);

/** Every key under `prefix` on every master, with the master that holds it. */
async function keysByMaster(prefix: string): Promise<Map<string, RedisProcess>> {
  const found = new Map<string, RedisProcess>();
  for (const shard of await cluster().shards()) {
    const admin = shard.master.admin();
    try {
      await admin.connect();
      let cursor = '0';
      do {
        const [next, keys] = await admin.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
        for (const key of keys) found.set(key, shard.master);
        cursor = next;
      } while (cursor !== '0');
    } finally {
      admin.disconnect();
    }
  }
  return found;
}

/** A name whose idempotency key (`{name}` is its hash tag) lands on `shard`. */
function nameOn(shard: ClusterShard): string {
  for (;;) {
    const name = `acct-1:${randomUUID()}`;
    const slot = keySlot(name);
    if (shard.slots.some(([start, end]) => slot >= start && slot <= end)) return name;
  }
}

describe('Cluster topology (D35)', () => {
  const ATTEMPT = { fingerprint: 'fp', requestedCardLimit: 1000, credentialId: 'cred-1' };

  it('is built from `store.redis.cluster` in a config file and knows every shard master', async () => {
    const config = await testConfig({ store: storeSection(cluster(), `test:${randomUUID().slice(0, 8)}:`) });
    expect(config.store).toMatchObject({ kind: 'redis', target: { topology: 'cluster' } });
    const store = createStore(config.store, Date.now) as RedisStore;
    try {
      await waitUntilPingable(store);
      const masters = (await cluster().shards()).map((shard) => shard.master.address).sort();
      expect(store.describe()).toMatchObject({ topology: 'cluster', up: true, masters, masterChanges: 0 });
      expect(store.client).toBeInstanceOf(Cluster);
    } finally {
      await store.close();
    }
  });

  it("spreads keys over the shards, keeps each script's keys in one slot and every key under the prefix", async () => {
    const prefix = `test:${randomUUID().slice(0, 8)}:`;
    const { store, client } = await openTopologyStoreWithClient(cluster(), { prefix });
    try {
      const families = Array.from({ length: 30 }, () => `fam_${randomUUID()}`);
      for (const familyId of families) {
        const token = { familyId, generation: 0, tokenHash: `h_${randomUUID()}` };
        await store.sessions.createFamily({
          token,
          credentialId: 'c',
          fingerprint: 'fp',
          expiresAt: Date.now() + 60_000,
          endsAt: Date.now() + 60_000,
          now: Date.now(),
        });
        // a rotation rewrites the family's one key
        expect(
          await store.sessions.rotate({
            token,
            credentialId: 'c',
            fingerprint: 'fp',
            notBefore: 0,
            next: { tokenHash: `h_${randomUUID()}`, sealed: 's' },
            newExpiresAt: Date.now() + 60_000,
            now: Date.now(),
            graceMs: 60_000,
          }),
        ).toMatchObject({ outcome: 'rotated' });
      }
      // A family of the format before issue 35 (a family hash and a hash per token): its
      // rotation script writes a third key of the family, all three in one slot.
      const legacy = { familyId: `fam_${randomUUID()}`, tokenHash: `h_${randomUUID()}` };
      await client.hset(
        `${prefix}fam:{${legacy.familyId}}`,
        'cred',
        'c',
        'revoked',
        '0',
        'fp',
        'fp',
        'login',
        String(Date.now()),
        'end',
        String(Date.now() + 60_000),
      );
      await client.hset(`${prefix}rt:{${legacy.familyId}}:${legacy.tokenHash}`, 'exp', String(Date.now() + 60_000));
      await client.pexpire(`${prefix}fam:{${legacy.familyId}}`, 120_000);
      await client.pexpire(`${prefix}rt:{${legacy.familyId}}:${legacy.tokenHash}`, 120_000);
      expect(
        await store.sessions.rotate({
          token: legacy,
          credentialId: 'c',
          fingerprint: 'fp',
          notBefore: 0,
          next: { tokenHash: `h_${randomUUID()}`, sealed: '' },
          newExpiresAt: Date.now() + 60_000,
          now: Date.now(),
          graceMs: 60_000,
        }),
      ).toMatchObject({ outcome: 'rotated' });
      const limiter = store.createRateLimiter({ keyPrefix: 'rl:login:', points: 5, durationSeconds: 60 });
      for (let i = 0; i < 30; i += 1) await limiter.consume(`subject-${i}:123`);
      for (let i = 0; i < 30; i += 1) await store.lockouts.recordFailure(`user-${i}`, { now: Date.now(), maxFailures: 10, lockoutMs: 60_000 });

      const keys = await keysByMaster(prefix);
      expect(keys.size).toBe(30 + 3 + 30 + 30);
      for (const key of keys.keys()) expect(key.startsWith(prefix)).toBe(true);
      for (const familyId of families) expect([...keys].filter(([key]) => key.includes(`{${familyId}}`))).toHaveLength(1);
      const legacyKeys = [...keys].filter(([key]) => key.includes(`{${legacy.familyId}}`));
      expect(legacyKeys).toHaveLength(3);
      expect(new Set(legacyKeys.map(([key]) => keySlot(key))).size).toBe(1);
      expect(new Set(legacyKeys.map(([, master]) => master)).size).toBe(1);
      // rate-limiter-flexible's keys: `<prefix>rl:login::<subject>`, one key per subject and window, no hash tag
      const limiterKeys = [...keys].filter(([key]) => key.startsWith(`${prefix}rl:login:`));
      expect(limiterKeys).toHaveLength(30);
      expect(limiterKeys[0]![0]).toMatch(new RegExp(`^${prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}rl:login::subject-\\d+:123$`));
      for (const kind of ['ses:', 'rl:login:', 'lock:']) {
        const masters = new Set([...keys].filter(([key]) => key.startsWith(`${prefix}${kind}`)).map(([, master]) => master));
        expect({ kind, shards: masters.size }).toEqual({ kind, shards: 3 });
      }
    } finally {
      await store.close();
    }
  });

  it('rate-limiter-flexible on a Cluster client: replicas share counts, over the limit is an answer (exceeded), never an Error', async () => {
    const prefix = `test:${randomUUID().slice(0, 8)}:`;
    const first = await openTopologyStore(cluster(), { prefix });
    const second = await openTopologyStore(cluster(), { prefix });
    try {
      // rejectIfRedisNotReady looks at client.status: a Cluster client reports `ready` too.
      expect(first.client.status).toBe('ready');
      const a = first.createRateLimiter({ keyPrefix: 'rl:refresh:', points: 5, durationSeconds: 60 });
      const b = second.createRateLimiter({ keyPrefix: 'rl:refresh:', points: 5, durationSeconds: 60 });
      for (let i = 0; i < 5; i += 1) await (i % 2 ? a : b).consume('cred-1:1');
      await expect(a.consume('cred-1:1')).resolves.toMatchObject({ consumed: 6, exceeded: true });
      await expect(b.consume('cred-2:1')).resolves.toMatchObject({ consumed: 1, exceeded: false });
    } finally {
      await first.close();
      await second.close();
    }
  });

  it("replicasToAck 1: WAIT goes to the shard holding the record (a paused replica leaves only its own shard's records unacknowledged)", async () => {
    // WAIT's timeout is the command timeout: shorter than the cluster's node timeout (so the
    // paused replica is not failed meanwhile); the client's deadline is twice it. Counted, not
    // timed: a record is acknowledged or counted as short of its replicas.
    const store = await openTopologyStore(cluster(), { replicasToAck: 1, commandTimeoutMs: NODE_TIMEOUT_MS / 2 });
    const events: StoreEvent[] = [];
    store.subscribe((event) => events.push(event));
    const shards = await cluster().shards();
    const [slowShard, ...others] = shards as [ClusterShard, ...ClusterShard[]];
    const write = async (name: string): Promise<number> => {
      await store.idempotency.reserve(name, { owner: 'gw-1', now: Date.now(), leaseMs: 10_000, attempt: ATTEMPT });
      await store.idempotency.complete(name, { owner: 'gw-1', record: sampleRecord(), expiresAt: Date.now() + 60_000, now: Date.now() });
      expect((await store.idempotency.peek(name, Date.now())).state).toBe('completed');
      return store.describe().unacknowledgedRecords;
    };
    try {
      for (const shard of shards) expect(await write(nameOn(shard))).toBe(0);

      const replica = slowShard.replicas[0]!;
      process.kill(replica.pid, 'SIGSTOP');
      try {
        // The other shards' replicas acknowledge as before; only the paused one's record is short.
        for (const shard of others) expect(await write(nameOn(shard))).toBe(0);
        expect(await write(nameOn(slowShard))).toBe(1);
      } finally {
        process.kill(replica.pid, 'SIGCONT');
      }
      // The replicas' events only: on a busy machine a health probe (500 ms here) can time out
      // meanwhile and add a down/up pair, which is not what this test is about.
      const replicaEvents = () => events.filter((event) => event.kind === 'replicas-behind' || event.kind === 'replicas-caught-up');
      expect(replicaEvents()).toEqual([{ kind: 'replicas-behind', wanted: 1, acknowledged: 0 }]);
      // Once the replica runs again its shard's records are acknowledged again: the count stops growing.
      await waitFor('a record on the resumed shard to be acknowledged', async () => {
        const before = store.describe().unacknowledgedRecords;
        return (await write(nameOn(slowShard))) === before;
      });
      expect(replicaEvents().at(-1)).toEqual({ kind: 'replicas-caught-up' });
    } finally {
      await store.close();
    }
  });

  replicasToAckCostTest("measures what replicasToAck costs a card record on a Cluster (WAIT in the record's pipeline)", cluster, [0, 1]);
});
