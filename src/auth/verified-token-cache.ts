/**
 * A size-capped map of tokens whose signature already verified. Insertion order doubles as
 * age: when full, the oldest entry goes. Entries are dropped by the caller at their `exp`.
 * Process memory only: tokens are never written anywhere from here.
 */
export class VerifiedTokenCache<T> {
  readonly #entries = new Map<string, T>();
  constructor(private readonly capacity: number) {}

  get(token: string): T | undefined {
    return this.capacity === 0 ? undefined : this.#entries.get(token);
  }

  set(token: string, value: T): void {
    if (this.capacity === 0) return;
    if (this.#entries.size >= this.capacity) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
    this.#entries.set(token, value);
  }

  delete(token: string): void {
    this.#entries.delete(token);
  }

  get size(): number {
    return this.#entries.size;
  }
}
