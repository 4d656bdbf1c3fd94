/**
 * The retry policy: which failures are tried again (those a CardGatewayError marks `retryable`:
 * no answer, RETRYABLE_STATUSES, a wrong-shaped success where the operation allows it), how
 * long to wait (Retry-After, else backoff), and when to stop (attempts, deadline, signal).
 */
import { AbortedError, CardGatewayError } from './errors.js';
import type { CallScope, RetryEvent } from './scope.js';

export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

/** Real time: a timer, cancelled when `signal` fires (the promise then rejects with its reason). */
export const realSleep: Sleep = (ms, signal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });

export interface BackoffOptions {
  /** First delay without a Retry-After; doubles per attempt. */
  baseMs: number;
  /** Largest delay without a Retry-After. */
  maxMs: number;
}

/**
 * The wait before retry number `failures` (1 after the first failure).
 * Without Retry-After: "equal jitter" exponential backoff, half fixed and half random, so a
 * crowd of clients that failed together spreads out but none retries at once.
 * With Retry-After: exactly what the gateway asked, plus up to `baseMs` of jitter so clients
 * limited in the same second do not all come back in the same millisecond. Never less than
 * Retry-After: coming back earlier only earns another refusal.
 */
export function backoffDelayMs(failures: number, retryAfterSeconds: number | undefined, options: BackoffOptions, random: () => number): number {
  if (retryAfterSeconds !== undefined) return retryAfterSeconds * 1000 + Math.floor(random() * options.baseMs);
  const ceiling = Math.min(options.maxMs, options.baseMs * 2 ** Math.min(failures - 1, 30));
  return Math.floor(ceiling / 2 + random() * (ceiling / 2));
}

/**
 * Seconds from a `Retry-After` header (RFC 9110: delay-seconds or an HTTP-date) or, failing
 * that, the envelope's `retryAfter`. Undefined when neither says anything usable.
 */
export function retryAfterSeconds(header: string | null, bodyValue: unknown, nowMs: number): number | undefined {
  if (header !== null) {
    const text = header.trim();
    if (/^\d+$/.test(text)) return Number(text);
    const date = Date.parse(text);
    if (!Number.isNaN(date)) return Math.max(0, Math.ceil((date - nowMs) / 1000));
  }
  if (typeof bodyValue === 'number' && Number.isFinite(bodyValue) && bodyValue >= 0) return bodyValue;
  return undefined;
}

/**
 * Waits for `promise`, but stops waiting (rejecting with the reason) when `signal` fires. A
 * promise no longer waited for may still fail later: that failure is dropped here rather than
 * left unhandled, whether the signal fired during the wait or before it.
 */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** What the retry loop needs of the client's settings. */
export interface RetryPolicy {
  readonly maxAttempts: number;
  readonly backoff: BackoffOptions;
  readonly now: () => number;
  readonly sleep: Sleep;
  readonly random: () => number;
  readonly onRetry: (event: RetryEvent) => void;
}

/**
 * Runs `run` until it succeeds, fails for good, runs out of attempts, or the next wait would
 * end past the deadline (then the last error is thrown at once rather than after a useless wait).
 */
export async function withRetries<T>(policy: RetryPolicy, scope: CallScope, run: (attempt: number) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    if (scope.signal?.aborted) throw new AbortedError({ requestId: scope.requestId, attempts: attempt - 1, cause: scope.signal.reason });
    let error: CardGatewayError;
    try {
      return await run(attempt);
    } catch (caught) {
      if (!(caught instanceof CardGatewayError)) throw caught;
      error = caught.withContext({ attempts: attempt, requestId: scope.requestId });
    }
    if (!error.retryable || attempt >= policy.maxAttempts) throw error;
    const delayMs = backoffDelayMs(attempt, error.retryAfter, policy.backoff, policy.random);
    if (policy.now() + delayMs >= scope.deadlineAt) throw error;
    try {
      policy.onRetry({ operation: scope.operation, attempt, error, delayMs, requestId: scope.requestId });
    } catch {
      // An observer must not change what the client does.
    }
    try {
      await policy.sleep(delayMs, scope.signal);
    } catch (sleepError) {
      if (scope.signal?.aborted) throw new AbortedError({ requestId: scope.requestId, attempts: attempt, cause: error });
      throw sleepError;
    }
  }
}
