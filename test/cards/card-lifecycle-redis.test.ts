import { createTestRedisStore } from '../support/redis.js';
import { cardLifecycleSuite } from './card-lifecycle.js';

cardLifecycleSuite('redis', async () => {
  const { store, cleanup } = await createTestRedisStore('card-lifecycle');
  return { store, cleanup };
});
