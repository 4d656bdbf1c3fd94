import { randomUUID } from 'node:crypto';
import {
  AbortedError,
  ApiError,
  CardGatewayError,
  CertificateError,
  NetworkError,
  RETRYABLE_STATUSES,
  SessionEndedError,
  type SessionEndReason,
} from './errors.js';
import { backoffDelayMs, realSleep, retryAfterSeconds, untilAborted, type BackoffOptions, type Sleep } from './retry.js';
import { createTransport, type CaOption, type FetchLike, type HttpResponseLike, type Transport } from './transport.js';
import { CARD_STATUSES, type Card, type CardRequest, type CardStatus, type CreateCardInput, type CreatedCard, type SessionTokens } from './types.js';

const LOGIN = '/api/v1/auth/login';
const REFRESH = '/api/v1/auth/refresh';
const LOGOUT = '/api/v1/auth/logout';
const CARDS = '/api/v1/issuing/cards';

/**
 * A refresh that failed without an answer may still have rotated the token at the gateway. The
 * old token keeps refreshing for 60 s after its first use (the grace), and presenting it later
 * is reuse, which revokes the whole session. So refresh retries stop well inside the grace.
 */
const REFRESH_RETRY_WINDOW_MS = 30_000;
/**
 * After a proactive refresh failed for a transient reason, callers keep using the current access
 * token while it has at least this much life left; closer to expiry it could expire in flight.
 */
const MIN_USABLE_MS = 5_000;
/** Pause before the next proactive refresh after a transient failure that named no Retry-After. */
const FAILED_REFRESH_PAUSE_MS = 5_000;
/**
 * 401 codes to a logout that mean the session is already over at the gateway (the refresh-token
 * family revoked, expired or unknown, the credential deactivated, or the session ended with its
 * credential's secret: `token_revoked`, whose session no refresh token can revive): what logout
 * asked for. Any other 401 (`token_expired`, `token_invalid`, ...) refused the access token
 * before the gateway looked at the refresh token, so nothing was revoked.
 */
const SESSION_OVER_CODES: ReadonlySet<string> = new Set([
  'refresh_token_invalid',
  'refresh_token_expired',
  'refresh_token_revoked',
  'credential_inactive',
  'token_revoked',
]);

export type Operation = 'login' | 'refresh' | 'logout' | 'createCard';

export interface RetryEvent {
  operation: Operation;
  /** The attempt that failed, 1-based. */
  attempt: number;
  error: CardGatewayError;
  /** How long the client waits before the next attempt. */
  delayMs: number;
  /** createCard's requestId, the same on every attempt. */
  requestId: string | undefined;
}

export interface CardGatewayClientOptions {
  /** The gateway's base address, e.g. `https://127.0.0.1:8443`. Must be https. */
  baseUrl: string | URL;
  /**
   * PEM certificate(s) to trust instead of the system CAs, e.g. the sandbox's self-signed
   * certificate (`.local/tls.crt` of `npm start`). Uses undici's fetch and Agent.
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

interface SessionState {
  tokens: SessionTokens;
  /** The refresh in flight: every caller that needs a fresh token waits for this one (single flight). */
  refreshing: Promise<void> | undefined;
  /** After a transient refresh failure: no new proactive attempt before this instant (ms). */
  refreshNotBefore: number;
}

interface Answer {
  status: number;
  headers: HttpResponseLike['headers'];
  /** The parsed body; undefined when empty or not JSON. */
  json: unknown;
  correlationId: string | undefined;
}

/** One caller's bounds: its deadline and signal, and createCard's requestId for the errors. */
interface CallScope {
  operation: Operation;
  deadlineAt: number;
  signal?: AbortSignal | undefined;
  requestId?: string | undefined;
}

/** How the shared refresh ended, as seen by one waiting caller. */
type RefreshOutcome = { failed: false } | { failed: true; error: unknown };

interface AttemptContext {
  operation: Operation;
  attempt: number;
  deadlineAt: number;
  signal?: AbortSignal | undefined;
  bearer?: string | undefined;
  requestId?: string | undefined;
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

const isInteger = (value: unknown): value is number => Number.isSafeInteger(value);

const isCardStatus = (value: unknown): value is CardStatus => (CARD_STATUSES as readonly unknown[]).includes(value);

/** OpenSSL's and Node's codes for a server certificate that was not accepted. */
const CERTIFICATE_ERROR_CODES = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_SIGNATURE_FAILURE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/** fetch reports "fetch failed" with the interesting part (ECONNREFUSED, a TLS error) as its cause. */
function causeCode(error: unknown): string | undefined {
  const cause = isRecord(error) && 'cause' in error ? error.cause : undefined;
  return isRecord(cause) && typeof cause.code === 'string' ? cause.code : undefined;
}

function describeCause(error: unknown): string {
  const cause = isRecord(error) && 'cause' in error ? error.cause : undefined;
  const code = causeCode(error);
  const message = cause instanceof Error ? cause.message : error instanceof Error ? error.message : String(error);
  return code && !message.includes(code) ? `${code}: ${message}` : message;
}

function parseCard(value: unknown): Card | undefined {
  if (!isRecord(value)) return undefined;
  const { cardId, pan, cvc, expMonth, expYear, status, requestedCardLimit, cardLimit, currency, createdAt } = value;
  if (typeof cardId !== 'string' || typeof pan !== 'string' || typeof cvc !== 'string' || typeof currency !== 'string' || typeof createdAt !== 'string')
    return undefined;
  if (!isInteger(expMonth) || !isInteger(expYear) || !isInteger(requestedCardLimit) || !isInteger(cardLimit)) return undefined;
  if (!isCardStatus(status)) return undefined;
  return { cardId, pan, cvc, expMonth, expYear, status, requestedCardLimit, cardLimit, currency, createdAt };
}

function parseTokens(value: unknown): SessionTokens | undefined {
  if (!isRecord(value)) return undefined;
  const { accessToken, accessTokenExpiresAt, refreshToken, refreshTokenExpiresAt, idToken, idTokenExpiresAt } = value;
  if (typeof accessToken !== 'string' || typeof refreshToken !== 'string' || !isInteger(accessTokenExpiresAt) || !isInteger(refreshTokenExpiresAt))
    return undefined;
  const tokens: SessionTokens = { accessToken, accessTokenExpiresAt, refreshToken, refreshTokenExpiresAt };
  if (typeof idToken === 'string' && isInteger(idTokenExpiresAt)) Object.assign(tokens, { idToken, idTokenExpiresAt });
  return tokens;
}

/**
 * A client of the card issuing gateway. One instance holds one session (one login) and may be
 * shared by any number of concurrent callers: they all see one refresh at a time.
 */
export class CardGatewayClient {
  readonly #baseUrl: string;
  readonly #options: CardGatewayClientOptions;
  readonly #refreshBeforeMs: number;
  readonly #deadlineMs: number;
  readonly #attemptTimeoutMs: number;
  readonly #maxAttempts: number;
  readonly #backoff: BackoffOptions;
  readonly #now: () => number;
  readonly #sleep: Sleep;
  readonly #random: () => number;
  #transport: Promise<Transport> | undefined;
  #session: SessionState | undefined;
  /** Why there is no session, once one ended. */
  #ended: { reason: SessionEndReason; cause: CardGatewayError | undefined } | undefined;

  constructor(options: CardGatewayClientOptions) {
    const base = new URL(options.baseUrl);
    // Passwords and tokens never travel in clear text; the gateway refuses plain HTTP anyway.
    if (base.protocol !== 'https:') throw new TypeError(`baseUrl must be an https:// address, got ${base.protocol}`);
    if (base.search || base.hash) throw new TypeError('baseUrl must not have a query or fragment');
    this.#baseUrl = base.href.replace(/\/+$/, '');
    this.#options = options;
    this.#refreshBeforeMs = (options.refreshBeforeSeconds ?? 300) * 1000;
    this.#deadlineMs = options.deadlineMs ?? 60_000;
    this.#attemptTimeoutMs = options.attemptTimeoutMs ?? 15_000;
    this.#maxAttempts = Math.max(1, options.maxAttempts ?? 8);
    this.#backoff = { baseMs: options.backoff?.baseMs ?? 250, maxMs: options.backoff?.maxMs ?? 8_000 };
    this.#now = options.now ?? Date.now;
    this.#sleep = options.sleep ?? realSleep;
    this.#random = options.random ?? Math.random;
    if (options.session) this.#session = { tokens: { ...options.session }, refreshing: undefined, refreshNotBefore: 0 };
  }

  /** A copy of the current tokens, or undefined when there is no session. */
  get session(): SessionTokens | undefined {
    return this.#session ? { ...this.#session.tokens } : undefined;
  }

  /**
   * Logs in and keeps the session. Retried within the deadline, like every operation, on network
   * errors, timeouts and the retryable statuses (RETRYABLE_STATUSES: 409, 429, 502, 503, 504): a
   * repeated login only leaves an unused session behind. A previous session of this client is
   * dropped, not logged out.
   */
  async login(username: string, password: string, options: CallOptions = {}): Promise<SessionTokens> {
    const deadlineAt = this.#deadlineAt(options);
    const tokens = await this.#withRetries({ operation: 'login', deadlineAt, signal: options.signal }, async (attempt) => {
      const context: AttemptContext = { operation: 'login', attempt, deadlineAt, signal: options.signal };
      const answer = await this.#exchange(LOGIN, { username, password }, context);
      if (answer.status !== 200) throw this.#apiError(answer, context);
      const parsed = parseTokens(answer.json);
      // Not retryable: another login would only open another session.
      if (!parsed) throw this.#invalidResponse(answer, context, false);
      return parsed;
    });
    this.#session = { tokens, refreshing: undefined, refreshNotBefore: 0 };
    this.#ended = undefined;
    this.#emitSession();
    return { ...tokens };
  }

  /**
   * A valid access token, refreshed first when fewer than `refreshBeforeSeconds` remain. Use it
   * for gateway calls this client does not wrap. Concurrent callers share one refresh; the wait
   * for it ends at this call's deadline (a retryable `timeout` NetworkError) or signal.
   */
  async accessToken(options: CallOptions = {}): Promise<string> {
    const session = this.#requireSession();
    return this.#freshAccessToken(session, { operation: 'refresh', deadlineAt: this.#deadlineAt(options), signal: options.signal });
  }

  /**
   * Refreshes now (joining a refresh already in flight) and returns the new tokens. The wait ends
   * at this call's deadline or signal; the refresh itself runs on for other callers.
   */
  async refresh(options: CallOptions = {}): Promise<SessionTokens> {
    const session = this.#requireSession();
    const outcome = await this.#awaitRefresh(session, { operation: 'refresh', deadlineAt: this.#deadlineAt(options), signal: options.signal });
    if (outcome.failed) throw outcome.error;
    return { ...this.#requireSession().tokens };
  }

  /**
   * Revokes the session at the gateway (the refresh token's whole family) and forgets it. The
   * access token is refreshed first when due, as for any call: the gateway refuses an expired one
   * before it looks at the refresh token. A 401 saying the session is already over
   * (`refresh_token_*`, `credential_inactive`, `token_revoked`) is the outcome asked for, so it resolves too. A 401
   * refusing the access token (`token_expired`, `token_invalid`, ...) revoked nothing: the session
   * is forgotten here, but logout rejects with SessionEndedError `revoke_failed`, because its
   * refresh tokens stay valid at the gateway until they expire. Any other failure keeps the
   * session so that logout can be called again.
   */
  async logout(options: CallOptions = {}): Promise<void> {
    const session = this.#session;
    if (!session) return;
    const scope: CallScope = { operation: 'logout', deadlineAt: this.#deadlineAt(options), signal: options.signal };
    try {
      await this.#withRetries(scope, async (attempt) => {
        // Revoke with the newest tokens: wait for a refresh in flight (an older refresh token past
        // its grace would count as reuse), and refresh first when due.
        const bearer = await this.#freshAccessToken(session, scope, true);
        const context: AttemptContext = { operation: 'logout', attempt, deadlineAt: scope.deadlineAt, signal: scope.signal, bearer };
        const answer = await this.#exchange(LOGOUT, { refreshToken: session.tokens.refreshToken }, context);
        if (answer.status !== 200) throw this.#apiError(answer, context);
      });
    } catch (error) {
      // A refresh on the way may have been refused: its 401 says the same as one to the logout.
      const refusal = error instanceof SessionEndedError && error.cause instanceof ApiError ? error.cause : error;
      if (!(refusal instanceof ApiError && refusal.status === 401)) throw error;
      if (!SESSION_OVER_CODES.has(refusal.code)) {
        this.#endSession(session, 'access_rejected', refusal);
        throw new SessionEndedError('revoke_failed', refusal);
      }
    }
    this.#endSession(session, 'logged_out', undefined);
  }

  /**
   * Creates a card, idempotently. The requestId is generated (UUID v4) unless given, and every
   * retry sends the same one, so a retry can never create a second card: after a network error,
   * a timeout, 409, 429, 502, 503 or 504 the call waits (Retry-After when the gateway names it,
   * else jittered backoff) and tries again until `deadlineMs`. Other 4xx are final. When the
   * call gives up, the error's `requestId` can be passed to a later createCard to finish it.
   */
  async createCard(input: CreateCardInput, options: CreateCardOptions = {}): Promise<CreatedCard> {
    const requestId = input.requestId ?? randomUUID();
    const body: CardRequest = { ...input, requestId };
    const path = options.revealDetails === true ? `${CARDS}?revealDetails=true` : CARDS;
    const deadlineAt = this.#deadlineAt(options);
    const scope: CallScope = { operation: 'createCard', deadlineAt, signal: options.signal, requestId };
    return this.#withRetries(scope, async (attempt) => {
      const bearer = await this.#freshAccessToken(this.#requireSession(), scope);
      const context: AttemptContext = { operation: 'createCard', attempt, deadlineAt, signal: options.signal, bearer, requestId };
      const answer = await this.#exchange(path, body, context);
      if (answer.status === 201 || answer.status === 200) {
        const card = parseCard(answer.json);
        // Retryable: the card exists or will, and a retry with this requestId answers it again.
        if (!card) throw this.#invalidResponse(answer, context, true);
        return {
          card,
          requestId,
          replayed: answer.headers.get('idempotent-replayed') === 'true',
          payloadMismatch: answer.headers.get('idempotency-payload-mismatch') === 'true',
          correlationId: answer.correlationId,
          attempts: attempt,
        };
      }
      const error = this.#apiError(answer, context);
      if (answer.status === 401) throw this.#sessionRejected(bearer, error);
      throw error;
    });
  }

  /** Closes the connections this client opened. A later call opens new ones. */
  async close(): Promise<void> {
    const transport = this.#transport;
    this.#transport = undefined;
    if (transport) await (await transport).close();
  }

  #deadlineAt(options: CallOptions): number {
    return this.#now() + (options.deadlineMs ?? this.#deadlineMs);
  }

  #requireSession(): SessionState {
    if (this.#session) return this.#session;
    throw new SessionEndedError(this.#ended?.reason ?? 'not_logged_in', this.#ended?.cause);
  }

  #emitSession(): void {
    try {
      this.#options.onSessionChange?.(this.session);
    } catch {
      // Documented: the hook must not throw. The tokens in memory are already right.
    }
  }

  #endSession(session: SessionState, reason: SessionEndReason, cause: CardGatewayError | undefined): SessionEndedError {
    if (this.#session === session) {
      this.#session = undefined;
      this.#ended = { reason, cause };
      this.#emitSession();
    }
    return new SessionEndedError(reason, cause);
  }

  /**
   * A 401 on an authenticated call: the token is expired, invalid, revoked (its session ended
   * with its credential, D41) or its credential inactive, and such a token cannot be refreshed,
   * so the session is over. Unless the token used is
   * no longer the current one (a refresh replaced it meanwhile): then only that call failed.
   */
  #sessionRejected(bearer: string, error: ApiError): CardGatewayError {
    const session = this.#session;
    if (session && session.tokens.accessToken === bearer) return this.#endSession(session, 'access_rejected', error);
    return error;
  }

  /**
   * The session's access token, refreshed first when fewer than `refreshBeforeSeconds` remain.
   * The wait for the shared refresh ends at the caller's deadline or signal. `ownSession` (for
   * logout): also wait for a refresh already in flight, due or not, and answer this session's
   * token even if a new login replaced it meanwhile.
   */
  async #freshAccessToken(session: SessionState, scope: CallScope, ownSession = false): Promise<string> {
    if (scope.signal?.aborted) throw new AbortedError({ requestId: scope.requestId, cause: scope.signal.reason });
    if (!(ownSession && session.refreshing)) {
      const remainingMs = session.tokens.accessTokenExpiresAt * 1000 - this.#now();
      if (remainingMs > this.#refreshBeforeMs) return session.tokens.accessToken;
      if (remainingMs > MIN_USABLE_MS && this.#now() < session.refreshNotBefore) return session.tokens.accessToken;
    }
    const outcome = await this.#awaitRefresh(session, scope);
    if (outcome.failed) {
      const { error } = outcome;
      // A proactive refresh that failed transiently costs nothing while the current token still
      // works; the next call after `refreshNotBefore` tries again.
      const stillUsable = (ownSession || this.#session === session) && session.tokens.accessTokenExpiresAt * 1000 - this.#now() > MIN_USABLE_MS;
      if (error instanceof CardGatewayError && error.retryable && stillUsable) return session.tokens.accessToken;
      throw error;
    }
    // A new login may have replaced the session meanwhile: other calls go on with the new one.
    return ownSession ? session.tokens.accessToken : this.#requireSession().tokens.accessToken;
  }

  /**
   * Waits for the session's shared refresh (starting it unless one is in flight) and tells how it
   * ended. Rejects only when this caller stops waiting first: AbortedError when its signal fires
   * (an already-aborted signal starts nothing), a retryable `timeout` NetworkError at its
   * deadline. The refresh itself, not tied to any one caller, runs on for the others.
   */
  async #awaitRefresh(session: SessionState, scope: CallScope): Promise<RefreshOutcome> {
    const { operation, signal, requestId } = scope;
    if (signal?.aborted) throw new AbortedError({ requestId, cause: signal.reason });
    const waitMs = scope.deadlineAt - this.#now();
    const timeoutError = (cause?: unknown): NetworkError =>
      new NetworkError(`${operation}: no fresh access token within the deadline (${Math.max(0, waitMs)} ms): the shared refresh is still running`, {
        code: 'timeout',
        requestId,
        cause,
      });
    if (waitMs <= 0) throw timeoutError();
    const outcome = this.#refreshOnce(session).then(
      (): RefreshOutcome => ({ failed: false }),
      (error: unknown): RefreshOutcome => ({ failed: true, error }),
    );
    const timeout = AbortSignal.timeout(waitMs);
    try {
      return await untilAborted(outcome, signal ? AbortSignal.any([signal, timeout]) : timeout);
    } catch (stopped) {
      if (signal?.aborted) throw new AbortedError({ requestId, cause: signal.reason });
      throw timeoutError(stopped);
    }
  }

  #refreshOnce(session: SessionState): Promise<void> {
    if (!session.refreshing) {
      const refreshing = this.#performRefresh(session).finally(() => {
        session.refreshing = undefined;
      });
      // Every waiter handles the outcome, but a waiter may stop waiting first: a failure that
      // nobody awaits any more must not become an unhandled rejection (which ends Node).
      refreshing.catch(() => undefined);
      session.refreshing = refreshing;
    }
    return session.refreshing;
  }

  async #performRefresh(session: SessionState): Promise<void> {
    const presented = session.tokens;
    // Not tied to any one caller's signal or deadline: the refresh is shared by all of them.
    const deadlineAt = this.#now() + Math.min(this.#deadlineMs, REFRESH_RETRY_WINDOW_MS);
    let next: SessionTokens;
    try {
      next = await this.#withRetries({ operation: 'refresh', deadlineAt }, async (attempt) => {
        const context: AttemptContext = { operation: 'refresh', attempt, deadlineAt, bearer: presented.accessToken };
        const answer = await this.#exchange(REFRESH, { refreshToken: presented.refreshToken }, context);
        if (answer.status !== 200) throw this.#apiError(answer, context);
        const parsed = parseTokens(answer.json);
        // Retryable within the grace: the old token still refreshes for 60 s.
        if (!parsed) throw this.#invalidResponse(answer, context, true);
        return parsed;
      });
    } catch (error) {
      // The spec: a 401 on refresh means a new login is required (revoked family, expired
      // tokens, deactivated credential). Say so once, clearly, to every waiting caller.
      if (error instanceof ApiError && error.status === 401) throw this.#endSession(session, 'refresh_rejected', error);
      if (error instanceof CardGatewayError && error.retryable) {
        session.refreshNotBefore = this.#now() + (error.retryAfter !== undefined ? error.retryAfter * 1000 : FAILED_REFRESH_PAUSE_MS);
      }
      throw error;
    }
    // Logged out or replaced by a new login meanwhile: the rotated token belongs to a session
    // that is no longer this client's.
    if (this.#session !== session) return;
    session.tokens = { ...presented, ...next, idToken: presented.idToken, idTokenExpiresAt: presented.idTokenExpiresAt };
    session.refreshNotBefore = 0;
    this.#emitSession();
  }

  /**
   * Runs `run` until it succeeds, fails for good, runs out of attempts, or the next wait would
   * end past the deadline (then the last error is thrown at once rather than after a useless wait).
   */
  async #withRetries<T>(scope: CallScope, run: (attempt: number) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt += 1) {
      if (scope.signal?.aborted) throw new AbortedError({ requestId: scope.requestId, attempts: attempt - 1, cause: scope.signal.reason });
      let error: CardGatewayError;
      try {
        return await run(attempt);
      } catch (caught) {
        if (!(caught instanceof CardGatewayError)) throw caught;
        error = caught.withContext({ attempts: attempt, requestId: scope.requestId });
      }
      if (!error.retryable || attempt >= this.#maxAttempts) throw error;
      const delayMs = backoffDelayMs(attempt, error.retryAfter, this.#backoff, this.#random);
      if (this.#now() + delayMs >= scope.deadlineAt) throw error;
      try {
        this.#options.onRetry?.({ operation: scope.operation, attempt, error, delayMs, requestId: scope.requestId });
      } catch {
        // An observer must not change what the client does.
      }
      try {
        await this.#sleep(delayMs, scope.signal);
      } catch (sleepError) {
        if (scope.signal?.aborted) throw new AbortedError({ requestId: scope.requestId, attempts: attempt, cause: error });
        throw sleepError;
      }
    }
  }

  #getTransport(): Promise<Transport> {
    // A failed setup (undici not installed, a bad `ca`) is not cached: the next call tries again.
    this.#transport ??= createTransport({ ca: this.#options.ca, fetch: this.#options.fetch }).catch((error: unknown) => {
      this.#transport = undefined;
      throw error;
    });
    return this.#transport;
  }

  /** One request: JSON in, status and parsed JSON out. Throws only when no answer arrived. */
  async #exchange(path: string, body: unknown, context: AttemptContext): Promise<Answer> {
    const transport = await this.#getTransport();
    const timeoutMs = Math.max(1, Math.min(this.#attemptTimeoutMs, context.deadlineAt - this.#now()));
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = context.signal ? AbortSignal.any([context.signal, timeout]) : timeout;
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
    if (context.bearer !== undefined) headers.authorization = `Bearer ${context.bearer}`;
    const errorContext = { requestId: context.requestId, attempts: context.attempt };
    let response: HttpResponseLike;
    let text: string;
    try {
      response = await transport.fetch(`${this.#baseUrl}${path}`, { method: 'POST', headers, body: JSON.stringify(body), signal });
      // Read under the same signal: an answer cut off mid-body is a network error too.
      text = await response.text();
    } catch (error) {
      if (context.signal?.aborted) throw new AbortedError({ ...errorContext, cause: error });
      if (timeout.aborted) {
        throw new NetworkError(`${context.operation}: no answer within ${timeoutMs} ms`, { ...errorContext, code: 'timeout', cause: error });
      }
      const code = causeCode(error);
      if (code !== undefined && CERTIFICATE_ERROR_CODES.has(code)) {
        throw new CertificateError(`${context.operation}: the gateway's TLS certificate was not accepted (${describeCause(error)}); check the ca option`, {
          ...errorContext,
          cause: error,
        });
      }
      throw new NetworkError(`${context.operation}: no answer from the gateway (${describeCause(error)})`, {
        ...errorContext,
        code: 'network_error',
        cause: error,
      });
    }
    let json: unknown;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: response.status, headers: response.headers, json, correlationId: response.headers.get('x-correlation-id') ?? undefined };
  }

  /** The gateway's envelope as an ApiError; anything else answering an error status as `unexpected_response`. */
  #apiError(answer: Answer, context: AttemptContext): ApiError {
    const envelope = answer.json;
    const retryable = RETRYABLE_STATUSES.has(answer.status);
    const base = { status: answer.status, retryable, requestId: context.requestId, attempts: context.attempt };
    if (isRecord(envelope) && typeof envelope.code === 'string' && typeof envelope.message === 'string') {
      return new ApiError(envelope.message, {
        ...base,
        code: envelope.code,
        correlationId: typeof envelope.correlationId === 'string' ? envelope.correlationId : answer.correlationId,
        retryAfter: retryAfterSeconds(answer.headers.get('retry-after'), envelope.retryAfter, this.#now()),
        details: isRecord(envelope.details) ? envelope.details : {},
      });
    }
    return new ApiError(`${context.operation}: unexpected ${answer.status} answer without the gateway's error envelope`, {
      ...base,
      code: 'unexpected_response',
      correlationId: answer.correlationId,
      retryAfter: retryAfterSeconds(answer.headers.get('retry-after'), undefined, this.#now()),
    });
  }

  #invalidResponse(answer: Answer, context: AttemptContext, retryable: boolean): CardGatewayError {
    return new CardGatewayError(`${context.operation}: the ${answer.status} answer does not have the documented shape`, {
      code: 'invalid_response',
      status: answer.status,
      correlationId: answer.correlationId,
      retryable,
      requestId: context.requestId,
      attempts: context.attempt,
    });
  }
}
