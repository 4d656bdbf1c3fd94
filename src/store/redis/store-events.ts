import type { StoreEvent } from '../store-types.js';

/** The listeners of one store's events (GatewayStore.subscribe); a listener's failure is its own. */
export class StoreEvents {
  readonly #listeners = new Set<(event: StoreEvent) => void>();

  subscribe(listener: (event: StoreEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  emit(event: StoreEvent): void {
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch {
        // a listener's failure is its own
      }
    }
  }

  clear(): void {
    this.#listeners.clear();
  }
}
