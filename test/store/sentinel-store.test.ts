import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createStore } from '../../src/store/create-store.js';
import type { RedisStore } from '../../src/store/redis/redis-store.js';
import { StoreUnavailableError, type StoreEvent } from '../../src/store/store-types.js';
import { testConfig } from '../support/gateway-fixture.js';
import { openTopologyStore, startSentinel, storeSection, waitUntilPingable } from '../support/redis-topologies.js';
import { sampleRecord } from './store-contract.js';
import { replicasToAckCostTest, topologySuites } from './topology-suites.js';

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
        token: { familyId: 'f1', tokenHash: 'h1' },
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
        expect(await admin.hget(`${config.store.kind === 'redis' ? config.store.keyPrefix : ''}fam:{f1}`, 'cred')).toBe('c');
      } finally {
        admin.disconnect();
      }
    } finally {
      await store.close();
    }
  });

  it('replicasToAck 2: a card record is acknowledged by both replicas before complete() resolves, and is on both right after', async () => {
    const store = await openTopologyStore(sentinel(), { replicasToAck: 2 });
    const events: StoreEvent[] = [];
    store.subscribe((event) => events.push(event));
    try {
      await store.idempotency.reserve('acct-1:req-ack', { owner: 'gw-1', now: Date.now(), leaseMs: 10_000, attempt: ATTEMPT });
      const record = sampleRecord();
      await store.idempotency.complete('acct-1:req-ack', { owner: 'gw-1', record, expiresAt: Date.now() + 60_000, now: Date.now() });
      const master = await sentinel().master();
      for (const replica of sentinel().nodes.filter((node) => node !== master)) {
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
      await store.close();
    }
  });

  it('replicasToAck more than there are: answered after the WAIT timeout all the same, counted, and reported once', async () => {
    const store = await openTopologyStore(sentinel(), { replicasToAck: 3 });
    const events: StoreEvent[] = [];
    store.subscribe((event) => events.push(event));
    try {
      for (let i = 0; i < 3; i += 1) {
        const name = `acct-1:req-short-${i}`;
        await store.idempotency.reserve(name, { owner: 'gw-1', now: Date.now(), leaseMs: 10_000, attempt: ATTEMPT });
        const started = performance.now();
        await store.idempotency.complete(name, { owner: 'gw-1', record: sampleRecord(), expiresAt: Date.now() + 60_000, now: Date.now() });
        // WAIT waits for its timeout (the command timeout, 300 ms), not for ever.
        expect(performance.now() - started).toBeGreaterThanOrEqual(250);
        expect(performance.now() - started).toBeLessThan(900);
        expect((await store.idempotency.peek(name, Date.now())).state).toBe('completed');
      }
      expect(store.describe().unacknowledgedRecords).toBe(3);
      expect(events).toEqual([{ kind: 'replicas-behind', wanted: 3, acknowledged: 2 }]);
    } finally {
      await store.close();
    }
  });

  replicasToAckCostTest('measures what replicasToAck costs a card record (WAIT on loopback replicas)', sentinel, [0, 1, 2]);

  // Last in this file: it moves the master for good.
  it('follows a manual failover (the old master stays alive, writable until the sentinels demote it): writes move to the new master within about a second', async () => {
    const store = await openTopologyStore(sentinel());
    const events: StoreEvent[] = [];
    store.subscribe((event) => events.push(event));
    try {
      const before = await sentinel().master();
      expect(await sentinel().sentinels[0]!.call('SENTINEL', 'FAILOVER', sentinel().masterName)).toBe('OK');
      const after = await sentinel().waitForNewMaster(before);
      const failures: unknown[] = [];
      const started = performance.now();
      let landed = false;
      while (!landed && performance.now() - started < 10_000) {
        const familyId = `fam_${randomUUID()}`;
        try {
          await store.sessions.createFamily({
            token: { familyId, tokenHash: 'h' },
            credentialId: 'c',
            fingerprint: 'fp',
            expiresAt: Date.now() + 60_000,
            endsAt: Date.now() + 60_000,
            now: Date.now(),
          });
          const admin = after.admin();
          try {
            await admin.connect();
            landed = (await admin.keys(`*fam:{${familyId}}`)).length === 1;
          } finally {
            admin.disconnect();
          }
        } catch (error) {
          failures.push(error);
        }
        if (!landed) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(landed).toBe(true);
      // The monitor asks a sentinel every second: the old master is left within about a second.
      expect(performance.now() - started).toBeLessThan(3_000);
      for (const failure of failures) expect(failure).toBeInstanceOf(StoreUnavailableError);
      await expect.poll(() => store.describe().masters, { timeout: 5_000 }).toEqual([after.address]);
      expect(events).toContainEqual({ kind: 'master-changed', from: before.address, to: after.address });
    } finally {
      await store.close();
    }
  });
});
