import type { StoredCard } from '../store/store-types.js';

/**
 * Card idempotency records whose card was already answered while the store write is still under
 * way (issue 20: the answer no longer waits a round trip for the record).
 *
 * Two readers need them: a reveal in this process, which must know the creator before the store
 * does, and the shutdown, which must not close the store under a write it has not finished.
 * At most one write per key is pending in a process: the claim keeps the key resolving in
 * memory until its write settles.
 */
export class PendingRecords {
  readonly #pending = new Map<string, { record: StoredCard; written: Promise<void> }>();

  /** Keeps `record` known until `write` settles, whichever way; the returned promise never rejects. */
  track(recordKey: string, record: StoredCard, write: Promise<unknown>): Promise<void> {
    const written = write.then(
      () => undefined,
      () => undefined,
    );
    const entry = { record, written };
    this.#pending.set(recordKey, entry);
    void written.then(() => {
      if (this.#pending.get(recordKey) === entry) this.#pending.delete(recordKey);
    });
    return written;
  }

  /** The record being written for `recordKey` in this process, if any. */
  recordOf(recordKey: string): StoredCard | undefined {
    return this.#pending.get(recordKey)?.record;
  }

  get size(): number {
    return this.#pending.size;
  }

  /**
   * Waits for every write pending now, at most `guardMs` (each write has the store's own
   * deadline; the guard only keeps a shutdown from hanging on a store that never answers).
   * Resolves true when none is left.
   */
  async drain(guardMs: number): Promise<boolean> {
    if (this.#pending.size === 0) return true;
    let guard: NodeJS.Timeout | undefined;
    const outlasted = new Promise<void>((resolve) => {
      guard = setTimeout(resolve, guardMs);
      guard.unref();
    });
    try {
      await Promise.race([Promise.all([...this.#pending.values()].map((entry) => entry.written)), outlasted]);
    } finally {
      clearTimeout(guard);
    }
    return this.#pending.size === 0;
  }
}
