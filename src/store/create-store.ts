import type { GatewayConfig } from '../config/load-config.js';
import { MemoryStore } from './memory/memory-store.js';
import { createStoreClient } from './redis/redis-client.js';
import { RedisStore } from './redis/redis-store.js';
import type { GatewayStore } from './store-types.js';

/** The store the config names; the Redis one namespaces its keys per environment (D8). */
export function createStore(config: GatewayConfig['store'], now: () => number): GatewayStore {
  if (config.kind === 'memory') return new MemoryStore(now);
  const client = createStoreClient(config);
  return new RedisStore(client, config.keyPrefix, {
    // A guarded script may still act up to one second after the gateway gave up on it (clock slack).
    deadlineMs: config.commandTimeoutMs + 1000,
    commandTimeoutMs: config.commandTimeoutMs,
    replicasToAck: config.replicasToAck,
  });
}

/** Whether the store answers within `timeoutMs` (pinging every 100 ms); never rejects. */
export async function waitForStore(store: GatewayStore, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    try {
      await store.ping();
      return true;
    } catch {
      if (performance.now() >= deadline) return false;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}
