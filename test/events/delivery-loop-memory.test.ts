import { MemoryEvents } from '../../src/store/memory/events.js';
import { deliveryLoopSuite } from './delivery-loop.js';

deliveryLoopSuite('memory', async (clock) => {
  const events = new MemoryEvents(() => clock.now());
  return { events, second: events, cleanup: async () => undefined };
});
