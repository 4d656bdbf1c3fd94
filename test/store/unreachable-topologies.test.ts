import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStoreClient, type RedisTarget } from '../../src/store/redis/redis-client.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { StoreUnavailableError, type StoreEvent } from '../../src/store/store-types.js';
import { freePort } from '../support/ports.js';
import { waitFor } from '../support/wait.js';
import { everyStoreOperation } from './store-contract.js';

/**
 * D23 on every topology: with nothing answering (no sentinel, no cluster node), every store
 * operation fails with StoreUnavailableError (a 503), fast, and the store reports itself down
 * once, not once per request.
 */

for (const topology of ['sentinel', 'cluster'] as const) {
  describe(`${topology} with nothing reachable`, () => {
    let store: RedisStore;
    const events: StoreEvent[] = [];

    beforeAll(async () => {
      const nodes = [
        { host: '127.0.0.1', port: await freePort() },
        { host: '127.0.0.1', port: await freePort() },
      ];
      const target: RedisTarget = topology === 'sentinel' ? { topology, masterName: 'nowhere', nodes } : { topology, nodes };
      store = new RedisStore(createStoreClient({ target, commandTimeoutMs: 300, connectTimeoutMs: 500 }), 'test:unreachable:');
      store.subscribe((event) => events.push(event));
    });

    afterAll(async () => {
      await store.close();
    });

    const token = { familyId: 'fam', generation: 0, tokenHash: 'h' };
    const operations = everyStoreOperation(() => store, token);

    it('rejects every operation with StoreUnavailableError', async () => {
      for (const [name, operation] of operations) {
        const error = await operation().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect({ name, error }).toEqual({ name, error: expect.any(StoreUnavailableError) });
      }
    });

    it('rejects a rate-limiter consume with a StoreUnavailableError (never an over-the-limit answer, never a 429)', async () => {
      const error = await store
        .createRateLimiter({ keyPrefix: 'rl:login:', points: 5, durationSeconds: 60 })
        .consume('x:1')
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(error).toBeInstanceOf(StoreUnavailableError);
    });

    it('describes itself down, and said so once', async () => {
      // The failures above answer at once (no offline queue); the health check they prompt
      // concludes on its own time, so its event is waited for, then more failures follow.
      await waitFor('the store to say it is down', () => events.some((event) => event.kind === 'down'));
      for (const [, operation] of operations) await operation().catch(() => undefined);
      expect(store.describe()).toMatchObject({ topology, up: false });
      expect(events.filter((event) => event.kind === 'down')).toHaveLength(1);
      expect(events.filter((event) => event.kind === 'up')).toHaveLength(0);
    });
  });
}
