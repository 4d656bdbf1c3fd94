import { StoreUnavailableError } from '../../src/store/store-types.js';
import { InterceptedStore, type InterceptedPart } from './intercepted-store.js';

/**
 * A real store whose parts can be made to fail on demand: `unavailable` rejects as an outage of
 * the shared store does (StoreUnavailableError), `broken` with an unexpected error (a bug, which
 * the gateway must answer as a bare 500). Faults are read at call time. One method can also be
 * held (`hold`): its calls wait until the test releases them, then reach the real store or fail.
 */
export type StoreFault = 'unavailable' | 'broken' | undefined;
export type StorePart = 'sessions' | 'idempotency' | 'lockouts' | 'events' | 'limiter';

/** Calls of one store method kept waiting by the test: a state to assert on, not a race. */
export interface HeldCalls {
  /** Calls that arrived and wait now. */
  readonly waiting: number;
  /** Calls that reached the real store after the release and were answered by it, in order. */
  readonly done: number;
  /** Resolves once `count` calls wait. */
  whenWaiting(count: number): Promise<void>;
  /** Lets the waiting calls (and later ones) through, or fails them with `failure`. */
  release(failure?: Error): void;
}

type HoldState = {
  waiting: number;
  done: number;
  gate: Promise<Error | undefined>;
  open(failure: Error | undefined): void;
  watchers: { count: number; resolve(): void }[];
};

export class FaultyStore extends InterceptedStore {
  readonly faults: Partial<Record<StorePart, StoreFault>> = {};
  readonly #holds = new Map<string, HoldState>();

  /** Holds every call of `part.method` (e.g. `idempotency`, `complete`) from now until released. */
  hold(part: StorePart, method: string): HeldCalls {
    let open!: (failure: Error | undefined) => void;
    const gate = new Promise<Error | undefined>((resolve) => (open = resolve));
    const state: HoldState = { waiting: 0, done: 0, gate, open, watchers: [] };
    this.#holds.set(`${part}.${method}`, state);
    return {
      get waiting() {
        return state.waiting;
      },
      get done() {
        return state.done;
      },
      whenWaiting: (count) => (state.waiting >= count ? Promise.resolve() : new Promise<void>((resolve) => state.watchers.push({ count, resolve }))),
      release: (failure) => state.open(failure),
    };
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

  protected override around(part: InterceptedPart, method: string, call: () => Promise<unknown>): Promise<unknown> {
    // Credentials' not-before instants (D41) are session state: they fail with the sessions.
    const failure = this.#failure(part === 'notBefore' ? 'sessions' : part);
    if (failure) return Promise.reject(failure);
    const held = this.#holds.get(`${part}.${method}`);
    return held ? this.#held(held, call) : call();
  }

  async #held(state: HoldState, call: () => Promise<unknown>): Promise<unknown> {
    state.waiting += 1;
    for (const watcher of state.watchers.filter((w) => state.waiting >= w.count)) watcher.resolve();
    const failure = await state.gate;
    state.waiting -= 1;
    if (failure) throw failure;
    const answer = await call();
    state.done += 1;
    return answer;
  }

  #failure(part: StorePart): Error | undefined {
    const fault = this.faults[part];
    if (fault === 'unavailable') return new StoreUnavailableError(new Error('injected outage'));
    if (fault === 'broken') return new TypeError('injected store bug');
    return undefined;
  }
}
