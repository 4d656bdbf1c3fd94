/**
 * Typed errors. Every failure the client reports is a CardGatewayError carrying the gateway's
 * machine-readable `code` when the gateway answered, plus `retryable`, so callers branch on
 * data instead of message text (messages may be reworded; codes are stable).
 */
import type { GatewayErrorCode } from './error-codes.js';

/** The gateway's codes with their statuses, generated from its error catalogue (error-codes.ts). */
export { GATEWAY_ERROR_CODES, type GatewayErrorCode } from './error-codes.js';

/** Codes the client itself reports when there is no gateway envelope to read. */
export type ClientErrorCode =
  /** No answer: connection refused or reset, TLS failure, DNS, socket closed mid-answer. */
  | 'network_error'
  /** The gateway's TLS certificate was not accepted (wrong `ca`, wrong host name, expired). */
  | 'certificate_error'
  /** One attempt took longer than `attemptTimeoutMs` (or the time left before the deadline). */
  | 'timeout'
  /** The caller's AbortSignal fired. */
  | 'aborted'
  /** An error status whose body is not the gateway's envelope (e.g. from a proxy in between). */
  | 'unexpected_response'
  /** A success status whose body is not what the route promises. */
  | 'invalid_response'
  /** No usable session: see SessionEndedError. */
  | 'session_ended';

/** `string & {}` keeps autocompletion of the known codes while admitting codes added later. */
export type ErrorCode = GatewayErrorCode | ClientErrorCode | (string & {});

/**
 * Statuses that say "this attempt did not take effect, or may be repeated safely with the same
 * requestId": 409 (a duplicate still in progress), 429 (limited), 502/504 (connector failed or
 * timed out; the gateway released the requestId, D17/D31), 503 (store, audit trail or password
 * hashing busy; nothing was changed, D23). Every other 4xx is final: repeating it cannot help.
 * So is a code the gateway's catalogue marks final whatever its status: 409 `card_canceled`.
 */
export const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([409, 429, 502, 503, 504]);

export interface CardGatewayErrorInit {
  code: ErrorCode;
  status?: number | undefined;
  correlationId?: string | undefined;
  retryAfter?: number | undefined;
  retryable: boolean;
  details?: Record<string, unknown> | undefined;
  requestId?: string | undefined;
  attempts?: number | undefined;
  cause?: unknown;
}

export class CardGatewayError extends Error {
  /** The gateway's envelope `code` (D36), or one of the client's own codes. */
  readonly code: ErrorCode;
  /** HTTP status of the answer; undefined when no answer arrived. */
  readonly status: number | undefined;
  /** The gateway's correlation id (envelope or `X-Correlation-Id`): quote it to support. */
  readonly correlationId: string | undefined;
  /** Seconds the gateway asked to wait (`Retry-After` / `retryAfter`), when it said. */
  readonly retryAfter: number | undefined;
  /** True when the same call may succeed later (for createCard: with the same requestId). */
  readonly retryable: boolean;
  /** The envelope's `details` (`fields` for validation errors); `{}` otherwise. */
  readonly details: Record<string, unknown>;
  /**
   * For createCard: the requestId used. After a retryable failure, calling createCard again
   * with this requestId can never create a second card.
   */
  readonly requestId: string | undefined;
  /** How many requests the operation sent before giving up (1 when it was not retried). */
  readonly attempts: number;

  constructor(message: string, init: CardGatewayErrorInit) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'CardGatewayError';
    this.code = init.code;
    this.status = init.status;
    this.correlationId = init.correlationId;
    this.retryAfter = init.retryAfter;
    this.retryable = init.retryable;
    this.details = init.details ?? {};
    this.requestId = init.requestId;
    this.attempts = init.attempts ?? 1;
  }

  /** The same error, told which operation attempt and requestId it belongs to. */
  withContext(context: { attempts: number; requestId?: string | undefined }): this {
    const copy = Object.create(Object.getPrototypeOf(this) as object) as this;
    Object.assign(copy, this, { attempts: context.attempts, requestId: context.requestId ?? this.requestId });
    // Own non-enumerable properties Object.assign skips.
    Object.defineProperty(copy, 'message', { value: this.message, writable: true, configurable: true });
    Object.defineProperty(copy, 'stack', { value: this.stack, writable: true, configurable: true });
    if (this.cause !== undefined) Object.defineProperty(copy, 'cause', { value: this.cause, writable: true, configurable: true });
    return copy;
  }
}

/** The gateway answered with an error status. */
export class ApiError extends CardGatewayError {
  declare readonly status: number;

  constructor(message: string, init: CardGatewayErrorInit & { status: number }) {
    super(message, init);
    this.name = 'ApiError';
  }
}

/** No (complete) answer arrived: the request may or may not have reached the gateway. */
export class NetworkError extends CardGatewayError {
  constructor(message: string, init: Omit<CardGatewayErrorInit, 'retryable' | 'code'> & { code: 'network_error' | 'timeout' }) {
    super(message, { ...init, retryable: true });
    this.name = 'NetworkError';
  }
}

/**
 * The TLS certificate was refused. Not retryable: it will be refused again until the `ca`
 * option or the gateway's certificate changes.
 */
export class CertificateError extends CardGatewayError {
  constructor(message: string, init: Omit<CardGatewayErrorInit, 'retryable' | 'code'>) {
    super(message, { ...init, code: 'certificate_error', retryable: false });
    this.name = 'CertificateError';
  }
}

/** The caller's AbortSignal fired; nothing further was attempted. */
export class AbortedError extends CardGatewayError {
  constructor(init: Omit<CardGatewayErrorInit, 'retryable' | 'code'> = {}) {
    super('The operation was aborted by the caller', { ...init, code: 'aborted', retryable: false });
    this.name = 'AbortedError';
  }
}

/**
 * Why a session is over:
 * - `not_logged_in`: this client has no session (never logged in, or a new client).
 * - `logged_out`: this client logged out.
 * - `refresh_rejected`: the gateway answered 401 to a refresh. `gatewayCode` says why:
 *   `refresh_token_revoked` (the token's family was revoked: a logout elsewhere, or a refresh
 *   token presented after its 60 s grace, which the gateway treats as theft and revokes the whole
 *   family), `refresh_token_expired` (24 h), `token_expired` (the access token expired before it
 *   was refreshed; the gateway refreshes only with a valid one), `credential_inactive`, ...
 * - `access_rejected`: the gateway answered 401 to an authenticated call (expired or invalid
 *   access token, deactivated credential). An expired access token cannot be refreshed.
 * - `revoke_failed` (from `logout` only): the gateway refused the access token (`gatewayCode`
 *   `token_expired`, `token_invalid`, ...) before it looked at the refresh token, so nothing was
 *   revoked: the session's refresh tokens stay valid at the gateway until they expire (24 h
 *   after login). The client has forgotten the session all the same.
 * In every case only a new `login` helps.
 */
export type SessionEndReason = 'not_logged_in' | 'logged_out' | 'refresh_rejected' | 'access_rejected' | 'revoke_failed';

const END_MESSAGES: Record<SessionEndReason, string> = {
  not_logged_in: 'Not logged in: call login() first',
  logged_out: 'The session was logged out: call login() to start a new one',
  refresh_rejected: 'The session has ended: the gateway refused to refresh it',
  access_rejected: 'The session has ended: the gateway refused its access token',
  revoke_failed:
    'Logout failed: the gateway refused the access token, so the session was not revoked and its refresh tokens stay valid at the gateway until they expire (24 h after login)',
};

const GATEWAY_CODE_HINTS: Partial<Record<string, string>> = {
  refresh_token_revoked:
    'the refresh token family was revoked (a logout elsewhere, an old refresh token reused after its 60 s grace, or the credential deactivated or given a new password since the login)',
  refresh_token_expired: "the refresh token expired (24 h after it was issued, or at the session's end, a week after its login by default)",
  refresh_token_invalid: 'the refresh token is unknown, malformed or of another credential',
  token_expired: 'the access token expired before it could be refreshed',
  token_revoked: 'the session ended with its credential: deactivated or given a new password since the login',
  token_invalid: 'the access token is not accepted',
  credential_inactive: 'the credential was deactivated by the operator',
};

/** The session cannot be used any more; log in again. Never retryable. */
export class SessionEndedError extends CardGatewayError {
  readonly reason: SessionEndReason;
  /** The gateway's code for the 401 that ended the session, when one did. */
  readonly gatewayCode: string | undefined;

  constructor(reason: SessionEndReason, cause?: CardGatewayError) {
    const hint = cause ? GATEWAY_CODE_HINTS[cause.code] : undefined;
    super(`${END_MESSAGES[reason]}${hint ? `: ${hint}` : ''}${cause ? ` (${cause.code})` : ''}; log in again`, {
      code: 'session_ended',
      status: cause?.status,
      correlationId: cause?.correlationId,
      retryable: false,
      details: cause?.details,
      cause,
    });
    this.name = 'SessionEndedError';
    this.reason = reason;
    this.gatewayCode = cause?.code;
  }
}
