import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { cardIdempotencySuite } from './card-idempotency.js';

cardIdempotencySuite('memory', async (clock) => {
  const store = new MemoryStore(() => clock.now());
  return { store, cleanup: () => store.close() };
});
