/**
 * When a delivery is attempted (D65): at once, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h
 * after the attempt before, eight attempts over about a day and a quarter; after the eighth the
 * delivery is failed and kept for redelivery. Each wait moves by up to ±10 %, so deliveries that
 * failed together (an endpoint down for a while) do not all come back in the same second.
 */
export const RETRY_DELAYS_MS: readonly number[] = [0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000];

export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length;

/** How far a wait may move either way, as a share of it. */
export const JITTER = 0.1;

/**
 * The wait before the next attempt, after `attemptsMade` attempts failed (1: the first one did),
 * or undefined when that was the last. `random` answers in [0, 1), like Math.random: 0.5 is the
 * wait itself, 0 is 10 % shorter, just under 1 is just under 10 % longer.
 */
export function nextAttemptDelay(attemptsMade: number, random: () => number): number | undefined {
  if (!Number.isInteger(attemptsMade) || attemptsMade < 1) throw new RangeError('attemptsMade counts the attempts made: 1 or more');
  const delay = RETRY_DELAYS_MS[attemptsMade];
  if (delay === undefined) return undefined;
  const share = Math.min(Math.max(random(), 0), 1);
  return Math.round(delay * (1 + JITTER * (2 * share - 1)));
}
