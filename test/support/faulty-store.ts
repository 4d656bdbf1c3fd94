import {
  StoreUnavailableError,
  type GatewayStore,
  type Limiter,
  type LimiterOptions,
  type StoreDescription,
  type StoreEvent,
} from '../../src/store/store-types.js';

/**
 * A real store whose parts can be made to fail on demand: `unavailable` rejects as an outage of
 * the shared store does (StoreUnavailableError), `broken` with an unexpected error (a bug, which
 * the gateway must answer as a bare 500). Faults are read at call time.
 */
export type StoreFault = 'unavailable' | 'broken' | undefined;
export type StorePart = 'sessions' | 'idempotency' | 'lockouts' | 'limiter';

export class FaultyStore implements GatewayStore {
  readonly faults: Partial<Record<StorePart, StoreFault>> = {};
  readonly sessions: GatewayStore['sessions'];
  readonly idempotency: GatewayStore['idempotency'];
  readonly lockouts: GatewayStore['lockouts'];
  readonly notBefore: GatewayStore['notBefore'];

  constructor(readonly inner: GatewayStore) {
    this.sessions = this.#guard('sessions', inner.sessions);
    // Credentials' not-before instants (D41) are session state: they fail with the sessions.
    this.notBefore = this.#guard('sessions', inner.notBefore);
    this.idempotency = this.#guard('idempotency', inner.idempotency);
    this.lockouts = this.#guard('lockouts', inner.lockouts);
  }

  /** Runs `work` with `part` failing as `fault`, then heals it. */
  async with<T>(part: StorePart, fault: StoreFault, work: () => Promise<T>): Promise<T> {
    this.faults[part] = fault;
    try {
      return await work();
    } finally {
      delete this.faults[part];
    }
  }

  #failure(part: StorePart): Error | undefined {
    const fault = this.faults[part];
    if (fault === 'unavailable') return new StoreUnavailableError(new Error('injected outage'));
    if (fault === 'broken') return new TypeError('injected store bug');
    return undefined;
  }

  #guard<T extends object>(part: StorePart, target: T): T {
    return new Proxy(target, {
      get: (object, property, receiver) => {
        const value: unknown = Reflect.get(object, property, receiver);
        if (typeof value !== 'function') return value;
        const method = value as (...args: unknown[]) => unknown;
        return (...args: unknown[]): unknown => {
          const failure = this.#failure(part);
          return failure ? Promise.reject(failure) : method.apply(object, args);
        };
      },
    });
  }

  createRateLimiter(options: LimiterOptions): Limiter {
    const limiter = this.inner.createRateLimiter(options);
    return {
      consume: (key) => {
        const failure = this.#failure('limiter');
        return failure ? Promise.reject(failure) : limiter.consume(key);
      },
    };
  }

  ping(): Promise<void> {
    return this.inner.ping();
  }

  describe(): StoreDescription {
    return this.inner.describe();
  }

  subscribe(listener: (event: StoreEvent) => void): () => void {
    return this.inner.subscribe(listener);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
