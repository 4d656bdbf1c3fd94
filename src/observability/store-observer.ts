import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import { STORE_FAILURE_REASONS, type GatewayStore, type StoreEvent } from '../store/store-types.js';

const TOPOLOGIES = ['memory', 'standalone', 'sentinel', 'cluster'] as const;

/**
 * The log lines about the shared store, word for word: the runbooks quote them (a test keeps
 * docs/runbooks/store-outage.md equal to these), so they change here and there together.
 */
export const STORE_LOG = {
  inUse: 'shared store in use',
  down: 'store unavailable; store-backed requests answer 503 until it serves again',
  up: 'store available; store-backed requests are served',
  downAtStart: 'store unavailable at start; /readyz reports not ready until it serves',
  evictingPolicy: 'store runs an evicting maxmemory-policy; it can silently drop lockouts, refresh tokens and card records (production refuses it, D54)',
  noEvictionAgain: 'store runs maxmemory-policy noeviction again',
  masterChanged: 'store master changed',
  replicasBehind: 'card records and events are not acknowledged by store.redis.replicasToAck replicas in time; answered anyway',
  replicasCaughtUp: 'card records and events are acknowledged by store.redis.replicasToAck replicas again',
} as const;

/**
 * Issue 10, D54, D55: what the operator sees of the store. Metrics `gateway_store_up` (0/1,
 * the store's last health check), `gateway_store_down_reason{reason}` (1 for why it is down),
 * `gateway_store_operation_failures_total{reason}`, `gateway_store_memory_used_ratio`,
 * `gateway_store_info{topology}` and `gateway_store_master_changes_total`, all read from the
 * store's own `describe()` when scraped, so there is no second copy of its state; and one log
 * line per change of state, with its reason (never one per request: the 503s themselves are
 * counted in gateway_store_unavailable_total). Returns the unsubscribe function.
 */
export function observeStore(store: GatewayStore, deps: { registry: Registry; logger: Logger }): () => void {
  const { registry, logger } = deps;
  const registers = [registry];
  const { topology } = store.describe();
  new Gauge({
    name: 'gateway_store_up',
    help: 'Whether every master of the shared store answered the last health check and can serve (1) or not (0).',
    registers,
    collect() {
      this.set(store.describe().up ? 1 : 0);
    },
  });
  new Gauge({
    name: 'gateway_store_down_reason',
    help: 'Why the shared store cannot serve (D55): 1 for the reason the last health check found, 0 for the others; all 0 while it serves.',
    labelNames: ['reason'],
    registers,
    collect() {
      const failure = store.describe().failure;
      for (const reason of STORE_FAILURE_REASONS) this.set({ reason }, failure?.reason === reason ? 1 : 0);
    },
  });
  new Counter({
    name: 'gateway_store_operation_failures_total',
    help: 'Store operations that failed (each answered 503), by reason (D55): out_of_memory counts writes Redis refused when full.',
    labelNames: ['reason'],
    registers,
    collect() {
      const counts = store.describe().failedOperations;
      this.reset();
      for (const reason of STORE_FAILURE_REASONS) this.inc({ reason }, counts[reason]);
    },
  });
  new Gauge({
    name: 'gateway_store_memory_used_ratio',
    help: "The fullest store master's used memory as a share of its maxmemory (D54); 0 when no master has a limit.",
    registers,
    collect() {
      this.set(store.describe().memoryUsedRatio ?? 0);
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
  logger.info(
    {
      topology,
      masters: described.masters,
      up: described.up,
      ...(described.failure && { reason: described.failure.reason, detail: described.failure.detail }),
    },
    STORE_LOG.inUse,
  );
  // Seen before this subscription (at start): said once now, as a change would be.
  if (described.evictingPolicy !== undefined && described.failure?.reason !== 'evicting_policy')
    logger.warn({ topology, policy: described.evictingPolicy }, STORE_LOG.evictingPolicy);
  const log = (event: StoreEvent) => {
    switch (event.kind) {
      case 'down':
        logger.warn({ topology, reason: event.reason, detail: event.detail }, STORE_LOG.down);
        break;
      case 'up':
        logger.info({ topology, masters: store.describe().masters }, STORE_LOG.up);
        break;
      case 'evicting-policy':
        if (event.policy === undefined) logger.info({ topology }, STORE_LOG.noEvictionAgain);
        else logger.warn({ topology, policy: event.policy }, STORE_LOG.evictingPolicy);
        break;
      case 'master-changed':
        logger.warn({ topology, from: event.from, to: event.to, ...(event.slots !== undefined && { slots: event.slots }) }, STORE_LOG.masterChanged);
        break;
      case 'replicas-behind':
        logger.warn({ topology, wanted: event.wanted, acknowledged: event.acknowledged }, STORE_LOG.replicasBehind);
        break;
      case 'replicas-caught-up':
        logger.info({ topology }, STORE_LOG.replicasCaughtUp);
        break;
    }
  };
  return store.subscribe(log);
}
