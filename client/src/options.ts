import type { BackoffOptions, RetryPolicy, Sleep } from './retry.js';
import { realSleep } from './retry.js';
import type { CallScope, Operation, RetryEvent } from './scope.js';
import type { CaOption, FetchLike } from './transport.js';
import type { SessionTokens } from './types.js';

export interface CardGatewayClientOptions {
  /** The gateway's base address, e.g. `https://127.0.0.1:8443`. Must be https. */
  baseUrl: string | URL;
  /**
   * PEM certificate(s) to trust instead of the system CAs, e.g. the sandbox's self-signed
   * certificate (`config/.local/tls.crt` of `npm start`). Uses undici's fetch and Agent.
   */
  ca?: CaOption;
  /** A fetch to use instead of the global one (a proxy, instrumentation). Overrides `ca`. */
  fetch?: FetchLike;
  /** Refresh when fewer than this many seconds remain on the access token. Default 300 (the spec's advice). */
  refreshBeforeSeconds?: number;
  /** Overall time for one operation, all retries and waits included. Default 60 000 ms. */
  deadlineMs?: number;
  /** Longest wait for one answer. Default 15 000 ms (the gateway's connector timeout is 5 s). */
  attemptTimeoutMs?: number;
  /** Most requests per operation. Default 8. */
  maxAttempts?: number;
  /** Backoff without Retry-After: starts at `baseMs` (250), doubles, at most `maxMs` (8000). */
  backoff?: Partial<BackoffOptions>;
  /** Milliseconds since the epoch; token expiry decisions and deadlines use it. Default Date.now. */
  now?: () => number;
  /** Waits between attempts. Default: a real timer. */
  sleep?: Sleep;
  /** Jitter source in [0, 1). Default Math.random. */
  random?: () => number;
  /** Resume a session saved earlier (e.g. from `onSessionChange`) instead of logging in. */
  session?: SessionTokens;
  /**
   * Called with the new tokens after every login and refresh (the rotated refresh token must be
   * kept: the old one dies 60 s after its first use) and with undefined when the session ends.
   * Must not throw; errors it throws are ignored so that the session in memory stays right.
   */
  onSessionChange?: (session: SessionTokens | undefined) => void;
  /** Called before each wait between attempts, e.g. to log or count retries. Errors are ignored. */
  onRetry?: (event: RetryEvent) => void;
}

export interface CallOptions {
  /**
   * Overrides the client's `deadlineMs` for this call. It bounds the call's wait for a refresh
   * shared with other callers too; that refresh runs on for them (and is itself retried for at
   * most 30 s).
   */
  deadlineMs?: number;
  /** Stops the call (and its waits); it then rejects with AbortedError. */
  signal?: AbortSignal;
}

export interface CreateCardOptions extends CallOptions {
  /** Ask for the full PAN and CVC (needs `cards:reveal`; only the card's creator may reveal it). */
  revealDetails?: boolean;
}

export interface GetCardOptions extends CallOptions {
  /** Ask for the full PAN and CVC (needs `cards:reveal`; only the card's creator may, within 24 h of its creation). */
  revealDetails?: boolean;
}

/** The options with their defaults applied: what the pipeline, the sender and the session read. */
export interface Settings extends RetryPolicy {
  /** The base address without a trailing slash. */
  readonly baseUrl: string;
  readonly refreshBeforeMs: number;
  readonly deadlineMs: number;
  readonly attemptTimeoutMs: number;
  readonly onSessionChange: (session: SessionTokens | undefined) => void;
}

export function resolveSettings(options: CardGatewayClientOptions): Settings {
  const base = new URL(options.baseUrl);
  // Passwords and tokens never travel in clear text; the gateway refuses plain HTTP anyway.
  if (base.protocol !== 'https:') throw new TypeError(`baseUrl must be an https:// address, got ${base.protocol}`);
  if (base.search || base.hash) throw new TypeError('baseUrl must not have a query or fragment');
  return {
    baseUrl: base.href.replace(/\/+$/, ''),
    refreshBeforeMs: (options.refreshBeforeSeconds ?? 300) * 1000,
    deadlineMs: options.deadlineMs ?? 60_000,
    attemptTimeoutMs: options.attemptTimeoutMs ?? 15_000,
    maxAttempts: Math.max(1, options.maxAttempts ?? 8),
    backoff: { baseMs: options.backoff?.baseMs ?? 250, maxMs: options.backoff?.maxMs ?? 8_000 },
    now: options.now ?? Date.now,
    sleep: options.sleep ?? realSleep,
    random: options.random ?? Math.random,
    // The hooks are looked up when called, as the caller's options object holds them then.
    onSessionChange: (session) => options.onSessionChange?.(session),
    onRetry: (event) => options.onRetry?.(event),
  };
}

/** A call's scope: its deadline from now (the call's `deadlineMs`, else the client's) and its signal. */
export function callScope(settings: Settings, operation: Operation, options: CallOptions, requestId?: string): CallScope {
  return { operation, deadlineAt: settings.now() + (options.deadlineMs ?? settings.deadlineMs), signal: options.signal, requestId };
}
