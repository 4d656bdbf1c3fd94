/** The gateway's only source of "now": injected so tests can move time without sleeping. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock that only moves when told to; for tests and the benchmark's fixed scenarios. */
export class ManualClock implements Clock {
  #now: number;

  constructor(start = Date.UTC(2026, 10, 22, 12, 0, 0)) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  advance(ms: number): void {
    this.#now += ms;
  }

  set(ms: number): void {
    this.#now = ms;
  }
}

export const toEpochSeconds = (ms: number): number => Math.floor(ms / 1000);
