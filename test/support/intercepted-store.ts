import type { GatewayStore, Limiter, LimiterOptions, StoreDescription, StoreEvent } from '../../src/store/store-types.js';

/** The parts of the store port whose calls a test may intercept. */
export type InterceptedPart = 'sessions' | 'idempotency' | 'lockouts' | 'notBefore' | 'events' | 'limiter';

/**
 * A real store with every call through its parts (and its rate limiters' `consume`) passed to
 * `around`, which decides what the call does: count it, fail it, or just run it. The counting
 * and the faulty store are this with their own `around`; ping, describe, subscribe and close go
 * straight to the inner store.
 */
export abstract class InterceptedStore implements GatewayStore {
  readonly sessions: GatewayStore['sessions'];
  readonly idempotency: GatewayStore['idempotency'];
  readonly lockouts: GatewayStore['lockouts'];
  readonly notBefore: GatewayStore['notBefore'];
  readonly events: GatewayStore['events'];

  constructor(readonly inner: GatewayStore) {
    this.sessions = this.#intercepted('sessions', inner.sessions);
    this.idempotency = this.#intercepted('idempotency', inner.idempotency);
    this.lockouts = this.#intercepted('lockouts', inner.lockouts);
    this.notBefore = this.#intercepted('notBefore', inner.notBefore);
    this.events = this.#intercepted('events', inner.events);
  }

  /** Called instead of the inner store's `part.method`; `call` runs it. */
  protected abstract around(part: InterceptedPart, method: string, call: () => Promise<unknown>): Promise<unknown>;

  #intercepted<T extends object>(part: InterceptedPart, target: T): T {
    return new Proxy(target, {
      get: (object, property, receiver) => {
        const value: unknown = Reflect.get(object, property, receiver);
        if (typeof value !== 'function') return value;
        const method = value as (...args: unknown[]) => Promise<unknown>;
        return (...args: unknown[]): Promise<unknown> => this.around(part, String(property), () => method.apply(object, args));
      },
    });
  }

  createRateLimiter(options: LimiterOptions): Limiter {
    const limiter = this.inner.createRateLimiter(options);
    return {
      consume: (key) => this.around('limiter', 'consume', () => limiter.consume(key)) as ReturnType<Limiter['consume']>,
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
