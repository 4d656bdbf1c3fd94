import type { GatewayStore, Limiter, LimiterOptions } from '../../src/store/store-types.js';

/**
 * A real store that counts the calls made through its port, by part and method
 * (`idempotency.reserve`, `limiter.consume`, ...): what a request costs the store, whatever the
 * store is. `reset()` starts a new count.
 */
export class CountingStore implements GatewayStore {
  readonly calls = new Map<string, number>();
  /** Calls made through the port whose promise has not settled yet (a write still under way after its answer). */
  inFlight = 0;
  readonly sessions: GatewayStore['sessions'];
  readonly idempotency: GatewayStore['idempotency'];
  readonly lockouts: GatewayStore['lockouts'];
  readonly notBefore: GatewayStore['notBefore'];

  constructor(readonly inner: GatewayStore) {
    this.sessions = this.#counted('sessions', inner.sessions);
    this.idempotency = this.#counted('idempotency', inner.idempotency);
    this.lockouts = this.#counted('lockouts', inner.lockouts);
    this.notBefore = this.#counted('notBefore', inner.notBefore);
  }

  /** The calls counted since the last reset, sorted by name. */
  counted(): Record<string, number> {
    return Object.fromEntries([...this.calls].sort(([a], [b]) => a.localeCompare(b)));
  }

  reset(): void {
    this.calls.clear();
  }

  #count(name: string): void {
    this.calls.set(name, (this.calls.get(name) ?? 0) + 1);
  }

  #counted<T extends object>(part: string, target: T): T {
    return new Proxy(target, {
      get: (object, property, receiver) => {
        const value: unknown = Reflect.get(object, property, receiver);
        if (typeof value !== 'function') return value;
        const method = value as (...args: unknown[]) => unknown;
        return (...args: unknown[]): unknown => {
          this.#count(`${part}.${String(property)}`);
          const answer = method.apply(object, args);
          if (answer instanceof Promise) {
            this.inFlight += 1;
            const settled = () => (this.inFlight -= 1);
            answer.then(settled, settled);
          }
          return answer;
        };
      },
    });
  }

  createRateLimiter(options: LimiterOptions): Limiter {
    const limiter = this.inner.createRateLimiter(options);
    return {
      consume: (key) => {
        this.#count('limiter.consume');
        return limiter.consume(key);
      },
    };
  }

  ping(): Promise<void> {
    return this.inner.ping();
  }

  describe(): ReturnType<GatewayStore['describe']> {
    return this.inner.describe();
  }

  subscribe(listener: Parameters<GatewayStore['subscribe']>[0]): () => void {
    return this.inner.subscribe(listener);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
