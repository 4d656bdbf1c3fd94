import { describe, expect, it } from 'vitest';
import { AA_BAND, efficiency, judgeAa, median, percentile, spread } from '../../bench/yardstick.js';

/**
 * The bench's yardstick arithmetic (bench/yardstick.ts): the A/A verdict that says whether a
 * run's ratios can be read, at the edges of its band and of its "4 of 5 rounds".
 */

describe('judgeAa', () => {
  it('counts a round at either edge of 0.95-1.05 as within, and one just outside as not', () => {
    expect(AA_BAND).toEqual({ low: 0.95, high: 1.05 });
    expect(judgeAa([0.95, 1.05, 1, 1, 1]).within).toBe(5);
    expect(judgeAa([0.9499, 1.0501, 1, 1, 1]).within).toBe(3);
  });

  it('trusts the estimator with 4 of 5 rounds within the band, not with 3', () => {
    expect(judgeAa([1, 1, 1, 1, 1.2])).toEqual({ within: 4, rounds: 5, needed: 4, trusted: true });
    expect(judgeAa([1, 1, 1, 0.9, 1.2])).toEqual({ within: 3, rounds: 5, needed: 4, trusted: false });
  });

  it('asks four fifths of another count of rounds, rounded up, and never trusts no round', () => {
    expect(judgeAa([1, 1])).toMatchObject({ needed: 2, trusted: true });
    expect(judgeAa([1, 1.2])).toMatchObject({ needed: 2, trusted: false });
    expect(judgeAa([1, 1, 1, 1, 1, 1, 1, 1.2, 1.2, 1.2])).toMatchObject({ needed: 8, within: 7, trusted: false });
    expect(judgeAa([])).toMatchObject({ needed: 0, trusted: false });
  });
});

describe('the ratios and their spread', () => {
  it('gives the efficiency as the baseline CPU per request over the subject one', () => {
    expect(efficiency(90, 180)).toBe(0.5);
    expect(efficiency(90, 60)).toBe(1.5);
  });

  it('takes medians of odd and even counts, the nearest-rank percentile below, and keeps the rounds in order', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(percentile([5, 1, 4, 2, 3], 50)).toBe(3);
    expect(
      percentile(
        Array.from({ length: 100 }, (_, i) => i + 1),
        99,
      ),
    ).toBe(100);
    expect(spread([0.5123, 0.48, 0.531], 2)).toEqual({ median: 0.51, min: 0.48, max: 0.53, rounds: [0.51, 0.48, 0.53] });
  });
});
