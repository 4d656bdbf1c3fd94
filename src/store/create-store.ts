import type { GatewayConfig } from '../config/load-config.js';
import { MemoryStore } from './memory/memory-store.js';
import { createRedisClient } from './redis/redis-client.js';
import { RedisStore } from './redis/redis-store.js';
import type { GatewayStore } from './store-types.js';

/** The store the config names; the Redis one namespaces its keys per environment (D8). */
export function createStore(config: GatewayConfig['store'], now: () => number): GatewayStore {
  if (config.kind === 'memory') return new MemoryStore(now);
  const client = createRedisClient(config);
  // A guarded script may still act up to one second after the gateway gave up on it (clock slack).
  return new RedisStore(client, config.keyPrefix, { deadlineMs: config.commandTimeoutMs + 1000 });
}
