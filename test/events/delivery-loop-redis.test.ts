import { createTestRedisStore, openReplicaStore } from '../support/redis.js';
import { deliveryLoopSuite } from './delivery-loop.js';

deliveryLoopSuite('redis', async () => {
  const { store, prefix, cleanup } = await createTestRedisStore('delivery-loop');
  // Another replica: its own client on the same keys.
  const replica = await openReplicaStore(prefix);
  return {
    events: store.events,
    second: replica.events,
    cleanup: async () => {
      await replica.close();
      await cleanup();
    },
  };
});
