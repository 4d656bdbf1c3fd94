import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { cardLifecycleSuite } from './card-lifecycle.js';

cardLifecycleSuite('memory', async () => {
  const store = new MemoryStore();
  return { store, cleanup: () => store.close() };
});
