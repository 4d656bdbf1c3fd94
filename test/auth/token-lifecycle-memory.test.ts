import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { tokenLifecycleSuite } from './token-lifecycle.js';

tokenLifecycleSuite('memory', async (clock) => {
  const store = new MemoryStore(() => clock.now());
  return { store, cleanup: () => store.close() };
});
