import { withDeadline } from '../../foundation/deadline.js';
import { storeLate } from './server-state.js';

/** Unknown-outcome writes kept for repair at most (the oldest go first: their claims lapse anyway). */
const MAX_REPAIRS = 10_000;
/** How long a repair is retried at most; past it a claim has lapsed and a record is covered by the connector's Idempotency-Key. */
export const REPAIR_HORIZON_MS = 10 * 60_000;
/** Repairs settled at once, at most. */
const BATCH = 64;

/**
 * A write whose reply never came (an idempotency record, an event, a delivery's settlement): the
 * gateway answered 503, but the script may have run (or may still run, when a re-sent command
 * reaches Redis late). Settled once the store
 * answers again, and not before the write itself can no longer run (its deadline).
 */
export interface Repair {
  /** Sends the write again: an owner-guarded (or id-guarded) script, harmless when the first one did run. */
  settle(): Promise<unknown>;
  /** Wall-clock ms: not before the original script's deadline has passed. */
  notBefore: number;
  giveUpAt: number;
}

/**
 * The repairs waiting for the store: run by the health monitor on every tick and as soon as the
 * store is up again, and once by a timer right after the first one is added.
 */
export class RepairQueue {
  readonly #commandTimeoutMs: number;
  /** A repair failed: the store is suspect (the health monitor checks it now). */
  readonly #onFailure: () => void;
  readonly #repairs = new Map<string, Repair>();
  #repairing = false;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(commandTimeoutMs: number, onFailure: () => void) {
    this.#commandTimeoutMs = commandTimeoutMs;
    this.#onFailure = onFailure;
  }

  get size(): number {
    return this.#repairs.size;
  }

  /** `id` names the write (its key and owner): a later repair of the same write replaces it. */
  add(id: string, repair: Repair): void {
    this.#repairs.delete(id);
    if (this.#repairs.size >= MAX_REPAIRS) {
      const oldest = this.#repairs.keys().next();
      if (!oldest.done) this.#repairs.delete(oldest.value);
    }
    this.#repairs.set(id, repair);
    // The monitor runs repairs every FAST_MONITOR_INTERVAL_MS while any are pending; one timer
    // makes the first one prompt without a timer per repair in an outage.
    if (this.#timer === undefined) {
      this.#timer = setTimeout(
        () => {
          this.#timer = undefined;
          void this.run();
        },
        Math.max(0, repair.notBefore - Date.now()) + 5,
      );
      this.#timer.unref();
    }
  }

  /** Settles every due repair, in batches; a failure ends the round (the store is suspect) until the next one. */
  async run(): Promise<void> {
    if (this.#repairing || this.#repairs.size === 0 || this.#closed) return;
    this.#repairing = true;
    try {
      const now = Date.now();
      const due: [string, Repair][] = [];
      for (const [id, repair] of this.#repairs) {
        if (repair.giveUpAt <= now) this.#repairs.delete(id);
        else if (repair.notBefore <= now) due.push([id, repair]);
      }
      for (let i = 0; i < due.length; i += BATCH) {
        let failed = false;
        await Promise.all(
          due.slice(i, i + BATCH).map(async ([id, repair]) => {
            try {
              await withDeadline(repair.settle(), this.#commandTimeoutMs, storeLate);
              if (this.#repairs.get(id) === repair) this.#repairs.delete(id);
            } catch {
              failed = true;
            }
          }),
        );
        if (failed) {
          this.#onFailure();
          return;
        }
      }
    } finally {
      this.#repairing = false;
    }
  }

  /** No repair runs after this; the ones left are given up. */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
  }
}
