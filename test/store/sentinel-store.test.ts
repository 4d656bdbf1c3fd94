import { randomUUID } from 'node:crypto';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createStore } from '../../src/store/create-store.js';
import type { RedisStore } from '../../src/store/redis/redis-store.js';
import { StoreUnavailableError, type StoreEvent } from '../../src/store/store-types.js';
import { testConfig } from '../support/gateway-fixture.js';
import { openTopologyStore, startSentinel, storeSection, waitUntilPingable } from '../support/redis-topologies.js';
import { sampleRecord } from './store-contract.js';
import { replicasToAckCostTest, topologySuites } from './topology-suites.js';
import { sleep, waitFor } from '../support/wait.js';

/**
 * D35 on Redis Sentinel: 1 master, 2 replicas, 3 sentinels (quorum 2), real redis-server
 * processes on loopback, started once for this file. The store contract, the token lifecycle
 * and the card idempotency suites run unchanged on it; then what only Sentinel has: the config
 * shape, the master the client found, and replicasToAck with WAIT.
 */

const sentinel = topologySuites('sentinel', startSentinel);

describe('Sentinel topology (D35)', () => {
  const ATTEMPT = { fingerprint: 'fp', requestedCardLimit: 1000, credentialId: 'cred-1' };

  it('is built from `store.redis.sentinel` in a config file and talks to the master the sentinels name', async () => {
    const config = await testConfig({ store: storeSection(sentinel(), `test:${randomUUID().slice(0, 8)}:`) });
    expect(config.store).toMatchObject({ kind: 'redis', target: { topology: 'sentinel', masterName: sentinel().masterName }, replicasToAck: 0 });
    const store = createStore(config.store, Date.now) as RedisStore;
    try {
      await waitUntilPingable(store);
      const master = await sentinel().master();
      expect(store.describe()).toMatchObject({ topology: 'sentinel', up: true, masters: [master.address], masterChanges: 0 });
      await store.sessions.createFamily({
        token: { familyId: 'f1', generation: 0, tokenHash: 'h1' },
        credentialId: 'c',
        fingerprint: 'fp',
        expiresAt: Date.now() + 60_000,
        endsAt: Date.now() + 60_000,
        now: Date.now(),
      });
      // The write is on the master the sentinels name.
      const admin = master.admin();
      try {
        await admin.connect();
        expect(await admin.hget(`${config.store.kind === 'redis' ? config.store.keyPrefix : ''}ses:{f1}`, 'cred')).toBe('c');
      } finally {
        admin.disconnect();
      }
    } finally {
      await store.close();
    }
  });

  it('replicasToAck 2: a card record is acknowledged by both replicas before complete() resolves, and is on both right after', async () => {
    // WAIT's timeout is the command timeout: long here, so that it is the paused replica's
    // resumption that ends the WAIT, not the timeout (a hang guard, never reached when it works).
    const store = await openTopologyStore(sentinel(), { replicasToAck: 2, commandTimeoutMs: 20_000 });
    const events: StoreEvent[] = [];
    store.subscribe((event) => events.push(event));
    const master = await sentinel().master();
    const replicas = sentinel().nodes.filter((node) => node !== master);
    const masterAdmin = master.admin();
    try {
      await masterAdmin.connect();
      await store.idempotency.reserve('acct-1:req-ack', { owner: 'gw-1', now: Date.now(), leaseMs: 10_000, attempt: ATTEMPT });
      const record = sampleRecord();
      // Order, not time: with one replica paused, complete() must be held in a WAIT on the
      // master (a completion that never sent WAIT, or sent it for fewer replicas, resolves first).
      const paused = replicas[0]!;
      const order: string[] = [];
      let settled = false;
      process.kill(paused.pid, 'SIGSTOP');
      let completion: Promise<void>;
      try {
        completion = store.idempotency.complete('acct-1:req-ack', { owner: 'gw-1', record, expiresAt: Date.now() + 60_000, now: Date.now() }).finally(() => {
          settled = true;
          order.push('complete() resolved');
        });
        completion.catch(() => undefined);
        const blockedInWait = async () =>
          String(await masterAdmin.call('CLIENT', 'LIST'))
            .split('\n')
            .some((line) => / flags=\w*b\w* .* cmd=wait /.test(line));
        await waitFor('complete() to settle or to be held in WAIT on the master', async () => settled || (await blockedInWait()));
      } finally {
        order.push('replica resumed');
        process.kill(paused.pid, 'SIGCONT');
      }
      await completion;
      expect(order, 'complete() resolved while a replica was paused: it did not wait for both replicas').toEqual(['replica resumed', 'complete() resolved']);
      for (const replica of replicas) {
        const admin = replica.admin();
        try {
          await admin.connect();
          expect(await admin.keys('*idem:{acct-1:req-ack}')).toHaveLength(1);
        } finally {
          admin.disconnect();
        }
      }
      expect(store.describe().unacknowledgedRecords).toBe(0);
      expect(events.filter((event) => event.kind === 'replicas-behind')).toEqual([]);
    } finally {
      masterAdmin.disconnect();
      await store.close();
    }
  });

  it('replicasToAck more than there are: answered after the WAIT timeout all the same, counted, and reported once', async () => {
    // WAIT's timeout is the command timeout: a short one here, since WAIT for a third replica
    // that does not exist always runs to it. The client's own deadline is twice that, so only
    // a WAIT without a timeout (for ever) could hang, and the hang guard would fail the test.
    const store = await openTopologyStore(sentinel(), { replicasToAck: 3, commandTimeoutMs: 1_000 });
    const events: StoreEvent[] = [];
    store.subscribe((event) => events.push(event));
    try {
      for (let i = 0; i < 3; i += 1) {
        const name = `acct-1:req-short-${i}`;
        await store.idempotency.reserve(name, { owner: 'gw-1', now: Date.now(), leaseMs: 10_000, attempt: ATTEMPT });
        await store.idempotency.complete(name, { owner: 'gw-1', record: sampleRecord(), expiresAt: Date.now() + 60_000, now: Date.now() });
        expect((await store.idempotency.peek(name, Date.now())).state).toBe('completed');
        // Each record is counted as short of its acknowledgements, in order.
        expect(store.describe().unacknowledgedRecords).toBe(i + 1);
      }
      expect(events).toEqual([{ kind: 'replicas-behind', wanted: 3, acknowledged: 2 }]);
    } finally {
      await store.close();
    }
  });

  replicasToAckCostTest('measures what replicasToAck costs a card record (WAIT on loopback replicas)', sentinel, [0, 1, 2]);

  // Last in this file: it moves the master for good.
  it('follows a manual failover (the old master stays alive, writable until the sentinels demote it): writes move to the new master, refused meanwhile only as unavailable', async () => {
    const store = await openTopologyStore(sentinel());
    const events: StoreEvent[] = [];
    store.subscribe((event) => events.push(event));
    try {
      const before = await sentinel().master();
      // The sentinels may not demote the old master until the writes have landed: the store
      // must leave it by itself (it asks a sentinel every second), not only once a demoted
      // master refuses writes with READONLY. (Sentinel demotes with REPLICAOF/SLAVEOF.)
      expect(await before.call('ACL', 'SETUSER', 'default', '-replicaof', '-slaveof')).toBe('OK');
      let demotionAllowed = false;
      const allowDemotion = async () => {
        if (demotionAllowed) return;
        demotionAllowed = true;
        expect(await before.call('ACL', 'SETUSER', 'default', '+replicaof', '+slaveof')).toBe('OK');
      };
      onTestFinished(allowDemotion);
      expect(await sentinel().sentinels[0]!.call('SENTINEL', 'FAILOVER', sentinel().masterName)).toBe('OK');
      const after = await sentinel().waitForNewMaster(before);
      const failures: unknown[] = [];
      let landed = false;
      // Bounded by count (a hang guard); the writes land once the monitor, which asks a
      // sentinel every second, has moved the client to the new master.
      for (let attempt = 0; !landed && attempt < 500; attempt += 1) {
        const familyId = `fam_${randomUUID()}`;
        try {
          await store.sessions.createFamily({
            token: { familyId, generation: 0, tokenHash: 'h' },
            credentialId: 'c',
            fingerprint: 'fp',
            expiresAt: Date.now() + 60_000,
            endsAt: Date.now() + 60_000,
            now: Date.now(),
          });
          const admin = after.admin();
          try {
            await admin.connect();
            landed = (await admin.keys(`*ses:{${familyId}}`)).length === 1;
          } finally {
            admin.disconnect();
          }
        } catch (error) {
          failures.push(error);
        }
        if (!landed) await sleep(50);
      }
      expect(landed, 'no write reached the new master while the old one was still a master: the store did not leave it').toBe(true);
      expect(((await before.call('ROLE')) as unknown[])[0], 'the old master was demoted meanwhile').toBe('master');
      await allowDemotion();
      for (const failure of failures) expect(failure).toBeInstanceOf(StoreUnavailableError);
      await waitFor('the store to name the new master', () => store.describe().masters[0] === after.address);
      expect(store.describe().masters).toEqual([after.address]);
      expect(events).toContainEqual({ kind: 'master-changed', from: before.address, to: after.address });
    } finally {
      await store.close();
    }
  });
});
