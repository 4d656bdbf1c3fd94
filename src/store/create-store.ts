import type { GatewayConfig } from '../config/config-types.js';
import { MemoryStore } from './memory/memory-store.js';
import { createStoreClient } from './redis/redis-client.js';
import { RedisStore } from './redis/redis-store.js';
import type { GatewayStore } from './store-types.js';

export interface CreateStoreOptions {
  /** D54: production refuses a Redis whose maxmemory-policy evicts keys (`refuse`); elsewhere a warning (`warn`, the default). */
  evictingPolicy?: 'refuse' | 'warn';
}

/** The store the config names; the Redis one namespaces its keys per environment (D8). */
export function createStore(config: GatewayConfig['store'], now: () => number, options: CreateStoreOptions = {}): GatewayStore {
  if (config.kind === 'memory') return new MemoryStore(now);
  const client = createStoreClient(config);
  // In the same turn as the client: the store's listeners see its very first connection error.
  return new RedisStore(client, config.keyPrefix, {
    // A guarded script may still act up to one second after the gateway gave up on it (clock slack).
    deadlineMs: config.commandTimeoutMs + 1000,
    commandTimeoutMs: config.commandTimeoutMs,
    replicasToAck: config.replicasToAck,
    evictingPolicy: options.evictingPolicy ?? 'warn',
  });
}

/**
 * Whether the store can serve within `timeoutMs` (pinging every 100 ms); never rejects. Gives up
 * at once on an evicting policy the store refuses (D54): that does not change by waiting.
 */
export async function waitForStore(store: GatewayStore, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    try {
      await store.ping();
      return true;
    } catch {
      if (performance.now() >= deadline || store.describe().failure?.reason === 'evicting_policy') return false;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}
