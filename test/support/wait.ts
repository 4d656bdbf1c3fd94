/**
 * The one way a test waits for state: poll a probe until it says yes. The limit is a hang
 * guard, never a measurement: generous (a minute by default) so that a busy machine only makes
 * a wait longer, and its expiry names what never happened.
 */

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** How long a wait may take before the test is failed as hung. */
export const HANG_GUARD_MS = 60_000;

export interface WaitOptions {
  /** Hang guard; default {@link HANG_GUARD_MS}. */
  timeoutMs?: number;
  /** Pause between probes; default 25 ms. */
  intervalMs?: number;
  /** An error from the probe that ends the wait at once (a process that exited) instead of a retry. */
  stopOn?: (error: unknown) => boolean;
}

/**
 * Polls `probe` until it returns something other than `undefined` or `false`, and resolves
 * with that. A probe that throws counts as "not yet" (a listener not up yet); the last error is
 * in the message when the guard expires.
 */
export async function waitFor<T>(
  what: string | (() => string),
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  options: WaitOptions = {},
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? HANG_GUARD_MS;
  const deadline = performance.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      if (options.stopOn?.(error)) throw error;
      lastError = error;
    }
    if (performance.now() > deadline) {
      const name = typeof what === 'string' ? what : what();
      const cause = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
      throw new Error(`hung: waited ${timeoutMs} ms for ${name}${cause}`);
    }
    await sleep(options.intervalMs ?? 25);
  }
}

/** Settles with `work`, or fails naming `what` once the hang guard passes without it settling. */
export async function withinHangGuard<T>(what: string, work: Promise<T>, timeoutMs = HANG_GUARD_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`hung: ${what} did not settle within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([work, guard]);
  } finally {
    clearTimeout(timer);
  }
}
