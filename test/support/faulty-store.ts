import { StoreUnavailableError } from '../../src/store/store-types.js';
import { InterceptedStore, type InterceptedPart } from './intercepted-store.js';

/**
 * A real store whose parts can be made to fail on demand: `unavailable` rejects as an outage of
 * the shared store does (StoreUnavailableError), `broken` with an unexpected error (a bug, which
 * the gateway must answer as a bare 500). Faults are read at call time.
 */
export type StoreFault = 'unavailable' | 'broken' | undefined;
export type StorePart = 'sessions' | 'idempotency' | 'lockouts' | 'limiter';

export class FaultyStore extends InterceptedStore {
  readonly faults: Partial<Record<StorePart, StoreFault>> = {};

  /** Runs `work` with `part` failing as `fault`, then heals it. */
  async with<T>(part: StorePart, fault: StoreFault, work: () => Promise<T>): Promise<T> {
    this.faults[part] = fault;
    try {
      return await work();
    } finally {
      delete this.faults[part];
    }
  }

  protected override around(part: InterceptedPart, _method: string, call: () => Promise<unknown>): Promise<unknown> {
    // Credentials' not-before instants (D41) are session state: they fail with the sessions.
    const failure = this.#failure(part === 'notBefore' ? 'sessions' : part);
    return failure ? Promise.reject(failure) : call();
  }

  #failure(part: StorePart): Error | undefined {
    const fault = this.faults[part];
    if (fault === 'unavailable') return new StoreUnavailableError(new Error('injected outage'));
    if (fault === 'broken') return new TypeError('injected store bug');
    return undefined;
  }
}
