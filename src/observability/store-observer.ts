import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { GatewayStore, StoreEvent } from '../store/store-types.js';

const TOPOLOGIES = ['memory', 'standalone', 'sentinel', 'cluster'] as const;

/**
 * Issue 10: what the operator sees of the store. Metrics `gateway_store_up` (0/1, the store's
 * last health check), `gateway_store_info{topology}` (1 for the topology in use, 0 for the
 * others) and `gateway_store_master_changes_total`; and one log line per change of state (never
 * one per request: the 503s themselves are counted in gateway_store_unavailable_total).
 *
 * A metric already registered under one of these names (say by observability/metrics.ts) is
 * used as it is; the missing ones are registered here. Returns the unsubscribe function.
 */
export function observeStore(store: GatewayStore, deps: { registry: Registry; logger: Logger }): () => void {
  const { registry, logger } = deps;
  const registers = [registry];
  const { topology } = store.describe();
  const up =
    existing(registry, 'gateway_store_up', Gauge) ??
    new Gauge({ name: 'gateway_store_up', help: 'Whether every master of the shared store answered the last health check (1) or not (0).', registers });
  const info =
    existing(registry, 'gateway_store_info', Gauge) ??
    new Gauge({ name: 'gateway_store_info', help: 'The shared store topology in use (D35): 1 for it, 0 for the others.', labelNames: ['topology'], registers });
  const masterChanges =
    existing(registry, 'gateway_store_master_changes_total', Counter) ??
    new Counter({
      name: 'gateway_store_master_changes_total',
      help: 'Master changes seen: a Sentinel promotion, a Cluster shard with a new master.',
      registers,
    });
  for (const known of TOPOLOGIES) info.set({ topology: known }, known === topology ? 1 : 0);
  up.set(store.describe().up ? 1 : 0);

  const described = store.describe();
  logger.info({ topology, masters: described.masters, up: described.up }, 'shared store in use');
  const log = (event: StoreEvent) => {
    switch (event.kind) {
      case 'down':
        up.set(0);
        logger.warn({ topology, reason: event.reason }, 'store unreachable; store-backed requests answer 503 until it returns');
        break;
      case 'up':
        up.set(1);
        logger.info({ topology, masters: store.describe().masters }, 'store reachable; store-backed requests are served');
        break;
      case 'master-changed':
        masterChanges.inc();
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

/** The metric registered under `name` when it is of the expected kind. */
function existing<T>(registry: Registry, name: string, kind: abstract new (...args: never[]) => T): T | undefined {
  const metric = registry.getSingleMetric(name);
  return metric instanceof kind ? metric : undefined;
}
