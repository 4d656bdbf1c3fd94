import type { StoreEvents } from './store-events.js';

/**
 * D35: card records and events stored without the `replicasToAck` acknowledgements they waited for,
 * counted, and reported once per change (replicas-behind, replicas-caught-up), never per record.
 */
export class ReplicaAcks {
  readonly wanted: number;
  readonly #events: StoreEvents;
  #behind = false;
  #unacknowledged = 0;

  constructor(wanted: number, events: StoreEvents) {
    this.wanted = wanted;
    this.#events = events;
  }

  /** Records written short of their acknowledgements since start. */
  get unacknowledged(): number {
    return this.#unacknowledged;
  }

  /** One record written, `acknowledged` replicas having confirmed it (WAIT's answer). */
  note(acknowledged: number): void {
    if (acknowledged < this.wanted) {
      this.#unacknowledged += 1;
      if (!this.#behind) {
        this.#behind = true;
        this.#events.emit({ kind: 'replicas-behind', wanted: this.wanted, acknowledged });
      }
    } else if (this.#behind) {
      this.#behind = false;
      this.#events.emit({ kind: 'replicas-caught-up' });
    }
  }
}
