import { ERROR_CATALOGUE, type ErrorCode } from './error-catalogue.js';

/**
 * Every error a client can see is a GatewayError with a stable machine-readable `code` (D36)
 * from the catalogue (error-catalogue.ts), which gives its status, message and retry advice;
 * anything else is rendered as a 500 without its text (D20).
 */
export { ALL_ERROR_CODES, bearerChallenge, ERROR_CODES, type ErrorCode } from './error-catalogue.js';

export interface FieldProblem {
  path: string;
  message: string;
}

export interface ErrorDetails {
  fields?: FieldProblem[];
  /** How many field problems were found beyond the listed ones (D29: error bodies stay small). */
  fieldsOmitted?: number;
  [key: string]: unknown;
}

/** At most this many field problems are listed in one answer (D29). */
export const MAX_LISTED_FIELDS = 20;

export interface GatewayErrorOptions {
  /** Instead of the catalogue's message: a more precise public wording of this case. */
  message?: string;
  details?: ErrorDetails;
  /** Seconds; by default the catalogue's fixed wait, if the code has one. */
  retryAfter?: number;
  headers?: Record<string, string>;
  cause?: unknown;
}

export class GatewayError extends Error {
  readonly status: number;
  readonly code: ErrorCode;
  readonly details: ErrorDetails;
  /** Seconds; rendered as `retryAfter` and the `Retry-After` header (D11, D17, D23). */
  readonly retryAfter: number | undefined;
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, options: GatewayErrorOptions = {}) {
    const entry: { status: number; message: string; retryAfterSeconds?: number } = ERROR_CATALOGUE[code];
    // A catalogue error is an answer, not a bug: no stack trace is captured (it was a measurable
    // part of every refused request under a flood). A 5xx keeps its cause, with the cause's stack.
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(options.message ?? entry.message, { cause: options.cause });
    Error.stackTraceLimit = limit;
    this.name = 'GatewayError';
    this.status = entry.status;
    this.code = code;
    this.details = options.details ?? {};
    const retryAfter = options.retryAfter ?? entry.retryAfterSeconds;
    this.retryAfter = retryAfter === undefined ? undefined : Math.max(1, Math.ceil(retryAfter));
    this.headers = options.headers ?? {};
  }
}

/** Field problems as details: the first MAX_LISTED_FIELDS, and a count of the rest (`alsoOmitted`: ones the caller already left out). */
function fieldDetails(fields: readonly FieldProblem[], alsoOmitted: number): ErrorDetails {
  const omitted = Math.max(0, fields.length - MAX_LISTED_FIELDS) + alsoOmitted;
  return omitted === 0 ? { fields: [...fields] } : { fields: fields.slice(0, MAX_LISTED_FIELDS), fieldsOmitted: omitted };
}

const fail = (code: ErrorCode, options?: GatewayErrorOptions) => new GatewayError(code, options);

/** One factory per case the code raises; status, message and fixed waits come from the catalogue. */
export const errors = {
  malformedRequest: (message?: string) => fail('malformed_request', { message }),
  httpsRequired: () => fail('https_required'),
  addressNotAllowed: () => fail('address_not_allowed'),
  notFound: () => fail('not_found'),
  cardNotFound: () => fail('card_not_found'),
  eventNotFound: () => fail('event_not_found'),
  invalidCursor: () => fail('invalid_cursor'),
  cardCanceled: () => fail('card_canceled'),
  methodNotAllowed: (allow: string) => fail('method_not_allowed', { headers: { allow } }),
  requestTimeout: () => fail('request_timeout'),
  validation: (fields: readonly FieldProblem[], alsoOmitted = 0) => fail('validation_failed', { details: fieldDetails(fields, alsoOmitted) }),
  malformedJson: () => fail('malformed_json'),
  emptyBody: () => fail('empty_body'),
  bodyTooLarge: () => fail('body_too_large'),
  urlTooLong: () => fail('url_too_long'),
  headersTooLarge: () => fail('headers_too_large'),
  unsupportedMediaType: () => fail('unsupported_media_type'),
  authenticationFailed: () => fail('authentication_failed'),
  tokenMissing: () => fail('token_missing'),
  tokenMalformed: () => fail('token_malformed'),
  tokenInvalid: () => fail('token_invalid'),
  tokenExpired: () => fail('token_expired'),
  tokenRevoked: () => fail('token_revoked'),
  tokenInUrl: () => fail('token_in_url'),
  credentialInactive: () => fail('credential_inactive'),
  refreshTokenInvalid: (message?: string) => fail('refresh_token_invalid', { message }),
  refreshTokenExpired: () => fail('refresh_token_expired'),
  refreshTokenRevoked: () => fail('refresh_token_revoked'),
  permissionDenied: (message?: string) => fail('permission_denied', { message }),
  rateLimited: (retryAfter: number, headers: Record<string, string> = {}) => fail('rate_limited', { retryAfter, headers }),
  /** D11a: a locked-out username is answered like a rate limit; only its retryAfter is longer. */
  lockedOut: (retryAfter: number, headers: Record<string, string> = {}) => fail('rate_limited', { retryAfter, headers }),
  idempotencyInProgress: (retryAfter: number) => fail('idempotency_in_progress', { retryAfter }),
  shuttingDown: () => fail('shutting_down'),
  storeUnavailable: (cause?: unknown) => fail('store_unavailable', { cause }),
  auditUnavailable: () => fail('audit_unavailable'),
  serverBusy: () => fail('server_busy'),
  connectorUnavailable: (cause?: unknown) => fail('connector_unavailable', { cause }),
  connectorInvalidAnswer: (cause?: unknown) => fail('connector_invalid_answer', { cause }),
  connectorTimeout: (cause?: unknown) => fail('connector_timeout', { cause }),
  recordUnreadable: (cause?: unknown) => fail('record_unreadable', { cause }),
  internal: (cause?: unknown) => fail('internal_error', { cause }),
} as const;

/** The D20 envelope (and the spec's rate-limit shape, which adds `retryAfter`), with the D36 code. */
export interface ErrorEnvelope {
  correlationId: string;
  status: number;
  code: ErrorCode;
  message: string;
  details: ErrorDetails;
  timestamp: string;
  retryAfter?: number;
}

export function toEnvelope(error: GatewayError, correlationId: string, nowMs: number): ErrorEnvelope {
  const envelope: ErrorEnvelope = {
    correlationId,
    status: error.status,
    code: error.code,
    message: error.message,
    details: error.details,
    timestamp: new Date(nowMs).toISOString(),
  };
  if (error.retryAfter !== undefined) envelope.retryAfter = error.retryAfter;
  return envelope;
}
