import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { storeContract } from './store-contract.js';

storeContract(
  'memory',
  async () => {
    const store = new MemoryStore();
    return { store, cleanup: () => store.close() };
  },
  'memory',
);
