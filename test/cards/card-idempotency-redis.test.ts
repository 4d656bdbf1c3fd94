import { createTestRedisStore } from '../support/redis.js';
import { cardIdempotencySuite } from './card-idempotency.js';

cardIdempotencySuite('redis', async () => {
  const { store, cleanup } = await createTestRedisStore('card-idempotency');
  return { store, cleanup };
});
