import { withDeadline } from '../../foundation/deadline.js';
import {
  StoreUnavailableError,
  type GatewayStore,
  type IdempotencyStore,
  type Limiter,
  type LimiterOptions,
  type LockoutStore,
  type NotBeforeStore,
  type SessionStore,
  type StoreDescription,
  type StoreEvent,
} from '../store-types.js';
import type { EventStore } from '../event-store.js';
import { redisEvents } from './events.js';
import { HealthMonitor } from './health-monitor.js';
import { redisIdempotency } from './idempotency.js';
import { redisLockouts } from './lockouts.js';
import { MasterWatch, topologyOf, type RedisTopology } from './master-watch.js';
import { redisNotBefore } from './not-before.js';
import { redisRateLimiter } from './rate-limiter.js';
import { recordContext, type RecordContext } from './record-context.js';
import type { StoreClient } from './redis-client.js';
import { RepairQueue } from './repair-queue.js';
import { ReplicaAcks } from './replica-acks.js';
import { defineScripts, type ScriptedClient } from './scripts.js';
import { redisSessions } from './sessions.js';
import { storeLate } from './server-state.js';
import { StoreEvents } from './store-events.js';

export interface RedisStoreOptions {
  /** close() quits the client (default true). */
  ownsClient?: boolean;
  /** How long after sending a guarded script may still act: the command timeout plus clock slack. */
  deadlineMs?: number;
  commandTimeoutMs?: number;
  /** D35: replicas that must acknowledge a card record (WAIT) before the client is answered. */
  replicasToAck?: number;
  /** Overrides the detected topology (only the label: detection is by the client's kind). */
  topology?: RedisTopology;
  /**
   * D54, a master whose `maxmemory-policy` evicts keys: `refuse` (production) counts the store
   * as down (`evicting_policy`: not ready); `warn` (default) serves and emits one
   * `evicting-policy` event per change, for a warning.
   */
  evictingPolicy?: 'refuse' | 'warn';
  /** Health-check periods while up / while down or repairing (default 1000 / 250 ms). */
  monitorIntervalMs?: number;
  fastMonitorIntervalMs?: number;
}

/**
 * The shared store on Redis (D35: one server, Sentinel or Cluster): one module per record kind
 * (sessions, idempotency, lockouts, not-before, rate limiters) over the Lua scripts (scripts.ts),
 * a health monitor with the masters it follows, and the repair queue of writes whose outcome is
 * unknown. This class only puts them together. A new record kind is its port (store-types.ts),
 * a module here built from the RecordContext (its scripts in scripts.ts), its twin in memory/,
 * and its cases in the contract suite.
 */
export class RedisStore implements GatewayStore {
  readonly sessions: SessionStore;
  readonly idempotency: IdempotencyStore;
  readonly lockouts: LockoutStore;
  readonly notBefore: NotBeforeStore;
  readonly events: EventStore;
  readonly #redis: ScriptedClient;
  readonly #ownsClient: boolean;
  readonly #commandTimeoutMs: number;
  readonly #context: RecordContext;
  readonly #events = new StoreEvents();
  readonly #masters: MasterWatch;
  readonly #health: HealthMonitor;
  readonly #repairs: RepairQueue;
  readonly #acks: ReplicaAcks;
  #closed = false;

  /**
   * `prefix` namespaces one environment's keys (D8), e.g. `gw:sandbox:`. `deadlineMs` is how
   * long after sending a guarded script may still act: the command timeout plus slack for the
   * clock difference between gateway and Redis hosts.
   */
  constructor(client: StoreClient, prefix: string, options: RedisStoreOptions = {}) {
    this.#redis = defineScripts(client);
    this.#ownsClient = options.ownsClient ?? true;
    this.#commandTimeoutMs = options.commandTimeoutMs ?? 300;
    this.#masters = new MasterWatch(client, options.topology ?? topologyOf(client), this.#events, this.#commandTimeoutMs);
    // A failed repair makes the store suspect: the monitor checks it now.
    this.#repairs = new RepairQueue(this.#commandTimeoutMs, () => this.#health.suspect());
    this.#health = new HealthMonitor(client, this.#masters, this.#events, this.#repairs, {
      commandTimeoutMs: this.#commandTimeoutMs,
      refuseEvicting: options.evictingPolicy === 'refuse',
      monitorIntervalMs: options.monitorIntervalMs,
      fastMonitorIntervalMs: options.fastMonitorIntervalMs,
    });
    this.#acks = new ReplicaAcks(options.replicasToAck ?? 0, this.#events);
    this.#context = recordContext(this.#redis, prefix, { commandTimeoutMs: this.#commandTimeoutMs, deadlineMs: options.deadlineMs ?? 2000 }, this.#health);
    this.sessions = redisSessions(this.#context);
    this.idempotency = redisIdempotency(this.#context, this.#repairs, this.#acks);
    this.lockouts = redisLockouts(this.#context);
    this.notBefore = redisNotBefore(this.#context);
    this.events = redisEvents(this.#context, this.#repairs, this.#acks);
  }

  get client(): StoreClient {
    return this.#redis;
  }

  createRateLimiter(options: LimiterOptions): Limiter {
    return redisRateLimiter(this.#context, options);
  }

  describe(): StoreDescription {
    const { up, failure, evictingPolicy, memoryUsedRatio, failedOperations } = this.#health.state;
    return {
      topology: this.#masters.kind,
      up,
      masters: this.#masters.masters,
      masterChanges: this.#masters.changes,
      unacknowledgedRecords: this.#acks.unacknowledged,
      pendingRepairs: this.#repairs.size,
      failure,
      evictingPolicy,
      memoryUsedRatio,
      failedOperations,
    };
  }

  subscribe(listener: (event: StoreEvent) => void): () => void {
    return this.#events.subscribe(listener);
  }

  async ping(): Promise<void> {
    const failure = await this.#health.failureNow();
    if (failure) throw new StoreUnavailableError(new Error(failure.detail), failure);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    // Claims and records still unsettled get one last chance (bounded by the command deadline).
    await this.#repairs.run();
    this.#closed = true;
    this.#repairs.close();
    this.#health.close();
    this.#events.clear();
    this.#masters.close();
    if (!this.#ownsClient) return;
    try {
      await withDeadline(this.#redis.quit(), this.#commandTimeoutMs * 3, storeLate);
    } catch {
      this.#redis.disconnect();
    }
  }
}
