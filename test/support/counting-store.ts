import { InterceptedStore, type InterceptedPart } from './intercepted-store.js';

/**
 * A real store that counts the calls made through its port, by part and method
 * (`idempotency.reserve`, `limiter.consume`, ...): what a request costs the store, whatever the
 * store is. `reset()` starts a new count.
 */
export class CountingStore extends InterceptedStore {
  readonly calls = new Map<string, number>();
  /** Calls made through the port whose promise has not settled yet (a write still under way after its answer). */
  inFlight = 0;

  /** The calls counted since the last reset, sorted by name. */
  counted(): Record<string, number> {
    return Object.fromEntries([...this.calls].sort(([a], [b]) => a.localeCompare(b)));
  }

  reset(): void {
    this.calls.clear();
  }

  protected override around(part: InterceptedPart, method: string, call: () => Promise<unknown>): Promise<unknown> {
    const name = `${part}.${method}`;
    this.calls.set(name, (this.calls.get(name) ?? 0) + 1);
    this.inFlight += 1;
    const answer = call();
    const settled = () => (this.inFlight -= 1);
    answer.then(settled, settled);
    return answer;
  }
}
