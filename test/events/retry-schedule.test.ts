import { describe, expect, it } from 'vitest';
import { MAX_ATTEMPTS, nextAttemptDelay, RETRY_DELAYS_MS } from '../../src/events/delivery/retry-schedule.js';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
/** Just under 1, as Math.random can answer. */
const HIGHEST = 1 - Number.EPSILON;

describe('the retry schedule (D65)', () => {
  it('is at once, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h: eight attempts', () => {
    expect(RETRY_DELAYS_MS).toEqual([0, 5 * SECOND, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR]);
    expect(MAX_ATTEMPTS).toBe(8);
  });

  it('waits exactly the scheduled time at the middle of the jitter', () => {
    const waits = [1, 2, 3, 4, 5, 6, 7].map((made) => nextAttemptDelay(made, () => 0.5));
    expect(waits).toEqual([5 * SECOND, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR]);
  });

  it('moves each wait by at most 10 % either way: 4.5 s to 5.5 s after the first attempt', () => {
    expect(nextAttemptDelay(1, () => 0)).toBe(4500);
    expect(nextAttemptDelay(1, () => HIGHEST)).toBe(5500);
    expect(nextAttemptDelay(7, () => 0)).toBe(9 * HOUR);
    expect(nextAttemptDelay(7, () => HIGHEST)).toBe(11 * HOUR);
    for (let made = 1; made < MAX_ATTEMPTS; made += 1) {
      for (const random of [0, 0.25, 0.5, 0.75, HIGHEST]) {
        const wait = nextAttemptDelay(made, () => random)!;
        const scheduled = RETRY_DELAYS_MS[made]!;
        expect(wait).toBeGreaterThanOrEqual(scheduled * 0.9);
        expect(wait).toBeLessThanOrEqual(scheduled * 1.1);
      }
    }
    // A random source out of range is held to the bounds rather than stretching a wait.
    expect(nextAttemptDelay(1, () => 5)).toBe(5500);
    expect(nextAttemptDelay(1, () => -1)).toBe(4500);
  });

  it('has no next attempt after the eighth, and one after the seventh', () => {
    expect(nextAttemptDelay(7, () => 0.5)).toBe(10 * HOUR);
    expect(nextAttemptDelay(8, () => 0.5)).toBeUndefined();
    expect(nextAttemptDelay(9, () => 0.5)).toBeUndefined();
  });

  it('refuses an attempt count below one', () => {
    expect(() => nextAttemptDelay(0, () => 0.5)).toThrow(RangeError);
    expect(() => nextAttemptDelay(1.5, () => 0.5)).toThrow(RangeError);
  });
});
