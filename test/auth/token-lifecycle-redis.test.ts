import { createTestRedisStore } from '../support/redis.js';
import { tokenLifecycleSuite } from './token-lifecycle.js';

tokenLifecycleSuite('redis', async () => {
  const { store, cleanup } = await createTestRedisStore('auth-lifecycle');
  return { store, cleanup };
});
