import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { GatewayStore, StoreEvent } from '../store/store-types.js';

const TOPOLOGIES = ['memory', 'standalone', 'sentinel', 'cluster'] as const;

/**
 * Issue 10: what the operator sees of the store. Metrics `gateway_store_up` (0/1, the store's
 * last health check), `gateway_store_info{topology}` (1 for the topology in use, 0 for the
 * others) and `gateway_store_master_changes_total`, all read from the store's own `describe()`
 * when scraped, so there is no second copy of its state; and one log line per change of state
 * (never one per request: the 503s themselves are counted in gateway_store_unavailable_total).
 * Returns the unsubscribe function.
 */
export function observeStore(store: GatewayStore, deps: { registry: Registry; logger: Logger }): () => void {
  const { registry, logger } = deps;
  const registers = [registry];
  const { topology } = store.describe();
  new Gauge({
    name: 'gateway_store_up',
    help: 'Whether every master of the shared store answered the last health check (1) or not (0).',
    registers,
    collect() {
      this.set(store.describe().up ? 1 : 0);
    },
  });
  const info = new Gauge({
    name: 'gateway_store_info',
    help: 'The shared store topology in use (D35): 1 for it, 0 for the others.',
    labelNames: ['topology'],
    registers,
  });
  for (const known of TOPOLOGIES) info.set({ topology: known }, known === topology ? 1 : 0);
  new Counter({
    name: 'gateway_store_master_changes_total',
    help: 'Master changes seen: a Sentinel promotion, a Cluster shard with a new master.',
    registers,
    collect() {
      // The store counts; a counter can only be raised, so it is set by raising it to the count.
      this.reset();
      this.inc(store.describe().masterChanges);
    },
  });

  const described = store.describe();
  logger.info({ topology, masters: described.masters, up: described.up }, 'shared store in use');
  const log = (event: StoreEvent) => {
    switch (event.kind) {
      case 'down':
        logger.warn({ topology, reason: event.reason }, 'store unreachable; store-backed requests answer 503 until it returns');
        break;
      case 'up':
        logger.info({ topology, masters: store.describe().masters }, 'store reachable; store-backed requests are served');
        break;
      case 'master-changed':
        logger.warn({ topology, from: event.from, to: event.to, ...(event.slots !== undefined && { slots: event.slots }) }, 'store master changed');
        break;
      case 'replicas-behind':
        logger.warn(
          { topology, wanted: event.wanted, acknowledged: event.acknowledged },
          'card records are not acknowledged by store.redis.replicasToAck replicas in time; answered anyway',
        );
        break;
      case 'replicas-caught-up':
        logger.info({ topology }, 'card records are acknowledged by store.redis.replicasToAck replicas again');
        break;
    }
  };
  return store.subscribe(log);
}
