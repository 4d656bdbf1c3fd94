/**
 * The session a client holds: its tokens, the one refresh in flight that every caller needing a
 * fresh token waits for (single flight), and how a session ends.
 */
import { AbortedError, ApiError, CardGatewayError, NetworkError, SessionEndedError, type SessionEndReason } from './errors.js';
import type { Settings } from './options.js';
import { untilAborted } from './retry.js';
import type { CallScope } from './scope.js';
import type { SessionTokens } from './types.js';

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

/** One login's state. A new login makes a new one, so a call can tell whether its session is still the current. */
export interface SessionState {
  tokens: SessionTokens;
  /** The refresh in flight: every caller that needs a fresh token waits for this one (single flight). */
  refreshing: Promise<void> | undefined;
  /** After a transient refresh failure: no new proactive attempt before this instant (ms). */
  refreshNotBefore: number;
}

/** How the shared refresh ended, as seen by one waiting caller. */
export type RefreshOutcome = { failed: false } | { failed: true; error: unknown };

/** Sends the refresh request with the presented tokens, retried until `deadlineAt`; answers the new tokens. */
export type RefreshCall = (presented: SessionTokens, deadlineAt: number) => Promise<SessionTokens>;

export class Session {
  readonly #settings: Settings;
  readonly #refreshCall: RefreshCall;
  #current: SessionState | undefined;
  /** Why there is no session, once one ended. */
  #ended: { reason: SessionEndReason; cause: CardGatewayError | undefined } | undefined;

  constructor(settings: Settings, refreshCall: RefreshCall, resumed: SessionTokens | undefined) {
    this.#settings = settings;
    this.#refreshCall = refreshCall;
    if (resumed) this.#current = { tokens: { ...resumed }, refreshing: undefined, refreshNotBefore: 0 };
  }

  /** A copy of the current tokens, or undefined when there is no session. */
  get tokens(): SessionTokens | undefined {
    return this.#current ? { ...this.#current.tokens } : undefined;
  }

  /** The current session, undefined when there is none. */
  get current(): SessionState | undefined {
    return this.#current;
  }

  /** A login's tokens: the new current session (a previous one is dropped, not logged out). */
  start(tokens: SessionTokens): void {
    this.#current = { tokens, refreshing: undefined, refreshNotBefore: 0 };
    this.#ended = undefined;
    this.#emit();
  }

  require(): SessionState {
    if (this.#current) return this.#current;
    throw new SessionEndedError(this.#ended?.reason ?? 'not_logged_in', this.#ended?.cause);
  }

  /** Ends `session` if it is still the current one; the error says why to the caller. */
  end(session: SessionState, reason: SessionEndReason, cause: CardGatewayError | undefined): SessionEndedError {
    if (this.#current === session) {
      this.#current = undefined;
      this.#ended = { reason, cause };
      this.#emit();
    }
    return new SessionEndedError(reason, cause);
  }

  /**
   * A 401 on an authenticated call: the token is expired, invalid, revoked (its session ended
   * with its credential, D41) or its credential inactive, and such a token cannot be refreshed,
   * so the session is over. Unless the token used is no longer the current one (a refresh
   * replaced it meanwhile): then only that call failed.
   */
  rejected(bearer: string, error: ApiError): CardGatewayError {
    const session = this.#current;
    if (session && session.tokens.accessToken === bearer) return this.end(session, 'access_rejected', error);
    return error;
  }

  /**
   * The session's access token, refreshed first when fewer than `refreshBeforeSeconds` remain.
   * The wait for the shared refresh ends at the caller's deadline or signal. `ownSession` (for
   * logout): also wait for a refresh already in flight, due or not, and answer this session's
   * token even if a new login replaced it meanwhile.
   */
  async freshAccessToken(session: SessionState, scope: CallScope, ownSession = false): Promise<string> {
    if (scope.signal?.aborted) throw new AbortedError({ requestId: scope.requestId, cause: scope.signal.reason });
    const now = this.#settings.now;
    if (!(ownSession && session.refreshing)) {
      const remainingMs = session.tokens.accessTokenExpiresAt * 1000 - now();
      if (remainingMs > this.#settings.refreshBeforeMs) return session.tokens.accessToken;
      if (remainingMs > MIN_USABLE_MS && now() < session.refreshNotBefore) return session.tokens.accessToken;
    }
    const outcome = await this.awaitRefresh(session, scope);
    if (outcome.failed) {
      const { error } = outcome;
      // A proactive refresh that failed transiently costs nothing while the current token still
      // works; the next call after `refreshNotBefore` tries again.
      const stillUsable = (ownSession || this.#current === session) && session.tokens.accessTokenExpiresAt * 1000 - now() > MIN_USABLE_MS;
      if (error instanceof CardGatewayError && error.retryable && stillUsable) return session.tokens.accessToken;
      throw error;
    }
    // A new login may have replaced the session meanwhile: other calls go on with the new one.
    return ownSession ? session.tokens.accessToken : this.require().tokens.accessToken;
  }

  /**
   * Waits for the session's shared refresh (starting it unless one is in flight) and tells how it
   * ended. Rejects only when this caller stops waiting first: AbortedError when its signal fires
   * (an already-aborted signal starts nothing), a retryable `timeout` NetworkError at its
   * deadline. The refresh itself, not tied to any one caller, runs on for the others.
   */
  async awaitRefresh(session: SessionState, scope: CallScope): Promise<RefreshOutcome> {
    const { operation, signal, requestId } = scope;
    if (signal?.aborted) throw new AbortedError({ requestId, cause: signal.reason });
    const waitMs = scope.deadlineAt - this.#settings.now();
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
    const deadlineAt = this.#settings.now() + Math.min(this.#settings.deadlineMs, REFRESH_RETRY_WINDOW_MS);
    let next: SessionTokens;
    try {
      next = await this.#refreshCall(presented, deadlineAt);
    } catch (error) {
      // The spec: a 401 on refresh means a new login is required (revoked family, expired
      // tokens, deactivated credential). Say so once, clearly, to every waiting caller.
      if (error instanceof ApiError && error.status === 401) throw this.end(session, 'refresh_rejected', error);
      if (error instanceof CardGatewayError && error.retryable) {
        session.refreshNotBefore = this.#settings.now() + (error.retryAfter !== undefined ? error.retryAfter * 1000 : FAILED_REFRESH_PAUSE_MS);
      }
      throw error;
    }
    // Logged out or replaced by a new login meanwhile: the rotated token belongs to a session
    // that is no longer this client's.
    if (this.#current !== session) return;
    session.tokens = { ...presented, ...next, idToken: presented.idToken, idTokenExpiresAt: presented.idTokenExpiresAt };
    session.refreshNotBefore = 0;
    this.#emit();
  }

  #emit(): void {
    try {
      this.#settings.onSessionChange(this.tokens);
    } catch {
      // Documented: the hook must not throw. The tokens in memory are already right.
    }
  }
}
