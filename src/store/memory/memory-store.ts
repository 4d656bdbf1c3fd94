import { noFailedOperations, type GatewayStore, type Limiter, type LimiterOptions, type StoreDescription, type StoreEvent } from '../store-types.js';
import { MemoryEvents } from './events.js';
import { MemoryIdempotency } from './idempotency.js';
import { MemoryLockouts } from './lockouts.js';
import { MemoryNotBefore } from './not-before.js';
import { memoryRateLimiter } from './rate-limiter.js';
import { MemorySessions } from './sessions.js';

/**
 * Single-process store: the embedded local default and the fast half of the contract tests.
 * The decisions mirror the Redis Lua scripts line for line; one contract suite checks both.
 * Expiry instants live in the records and are compared with the caller's `now`; a periodic
 * sweep only frees memory.
 */
export class MemoryStore implements GatewayStore {
  readonly sessions = new MemorySessions();
  readonly idempotency = new MemoryIdempotency();
  readonly lockouts = new MemoryLockouts();
  readonly notBefore = new MemoryNotBefore();
  readonly events: MemoryEvents;
  readonly #sweeper: NodeJS.Timeout;

  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
    this.events = new MemoryEvents(now);
    this.#sweeper = setInterval(() => this.sweep(), 60_000);
    this.#sweeper.unref();
  }

  /** Drops every record that is dead at `now` (the injected clock's); runs every minute by itself. */
  sweep(now = this.#now()): void {
    this.sessions.sweep(now);
    this.idempotency.sweep(now);
    this.lockouts.sweep(now);
    this.events.sweep(now);
  }

  /** How many records each part holds: what a sweep keeps bounded by live data. */
  size(): { families: number; idempotency: number; lockouts: number } {
    return {
      families: this.sessions.families.size,
      idempotency: this.idempotency.records.size,
      lockouts: this.lockouts.records.size,
    };
  }

  createRateLimiter(options: LimiterOptions): Limiter {
    return memoryRateLimiter(options);
  }

  async ping(): Promise<void> {}

  /** In the process itself: always up, no master, nothing to acknowledge or repair. */
  describe(): StoreDescription {
    return {
      topology: 'memory',
      up: true,
      masters: [],
      masterChanges: 0,
      unacknowledgedRecords: 0,
      pendingRepairs: 0,
      failure: undefined,
      evictingPolicy: undefined,
      memoryUsedRatio: undefined,
      failedOperations: noFailedOperations(),
    };
  }

  /** Nothing ever changes state: no events. */
  subscribe(_listener: (event: StoreEvent) => void): () => void {
    return () => undefined;
  }

  async close(): Promise<void> {
    clearInterval(this.#sweeper);
  }
}
