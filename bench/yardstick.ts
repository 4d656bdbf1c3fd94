/**
 * The arithmetic of the bench's yardstick, kept apart from the processes so that it is tested:
 * the CPU efficiency of a server against its baseline round by round, their median and range,
 * and whether an A/A (two identical bare proxies measured the same way) says the method can be
 * trusted on this machine at this moment.
 */

export const median = (values: readonly number[]): number => {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

/** The `p`-th percentile (0-100) of `values`, the nearest rank below. */
export const percentile = (values: readonly number[], p: number): number => {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};

export interface Spread {
  median: number;
  min: number;
  max: number;
  /** Every value, in the order measured. */
  rounds: number[];
}

const rounded = (value: number, digits: number) => Math.round(value * 10 ** digits) / 10 ** digits;

export function spread(values: readonly number[], digits = 2): Spread {
  return {
    median: rounded(median(values), digits),
    min: rounded(Math.min(...values), digits),
    max: rounded(Math.max(...values), digits),
    rounds: values.map((value) => rounded(value, digits)),
  };
}

/**
 * A server's CPU efficiency against its baseline in one round: the baseline's CPU per request
 * over the server's. 1 is the baseline's cost; 0.5 is twice its CPU per request.
 */
export const efficiency = (baselineCpuUsPerRequest: number, cpuUsPerRequest: number): number => baselineCpuUsPerRequest / cpuUsPerRequest;

/** The band an A/A's rounds must fall in, and the share of rounds that must. */
export const AA_BAND = { low: 0.95, high: 1.05 } as const;

export interface AaVerdict {
  within: number;
  rounds: number;
  /** Rounds that must be within the band: 4 of 5, i.e. four fifths rounded up. */
  needed: number;
  trusted: boolean;
}

/**
 * Whether an A/A's round ratios let the estimator be trusted: within 0.95-1.05 (inclusive) in at
 * least four rounds of five (four fifths of the rounds, rounded up, for another count).
 */
export function judgeAa(ratios: readonly number[]): AaVerdict {
  const within = ratios.filter((ratio) => ratio >= AA_BAND.low && ratio <= AA_BAND.high).length;
  const needed = Math.ceil((ratios.length * 4) / 5);
  return { within, rounds: ratios.length, needed, trusted: ratios.length > 0 && within >= needed };
}
