/**
 * The gateway's error catalogue. Every error a client can see is a GatewayError with a stable
 * machine-readable `code` (D36), a status and a public message; anything else is rendered as a
 * 500 without its text (D20). Clients branch on `code`; messages may be reworded.
 */
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

/** Every code the gateway emits, with its status. The API guide and the OpenAPI list these. */
export const ERROR_CODES = {
  malformed_request: 400,
  malformed_json: 400,
  empty_body: 400,
  validation_failed: 400,
  authentication_failed: 401,
  token_missing: 401,
  token_malformed: 401,
  token_invalid: 401,
  token_expired: 401,
  token_revoked: 401,
  token_in_url: 401,
  credential_inactive: 401,
  refresh_token_invalid: 401,
  refresh_token_expired: 401,
  refresh_token_revoked: 401,
  https_required: 403,
  address_not_allowed: 403,
  permission_denied: 403,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  idempotency_in_progress: 409,
  body_too_large: 413,
  url_too_long: 414,
  unsupported_media_type: 415,
  rate_limited: 429,
  headers_too_large: 431,
  internal_error: 500,
  record_unreadable: 500,
  connector_unavailable: 502,
  connector_invalid_answer: 502,
  shutting_down: 503,
  store_unavailable: 503,
  audit_unavailable: 503,
  server_busy: 503,
  connector_timeout: 504,
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

/** The codes answered with 401: each carries a `WWW-Authenticate: Bearer` challenge (D36). */
type UnauthorizedCode = { [C in ErrorCode]: (typeof ERROR_CODES)[C] extends 401 ? C : never }[ErrorCode];

/**
 * The RFC 6750 (section 3.1) `error` attribute of the `WWW-Authenticate: Bearer` challenge of
 * every 401, per code; `null`: a bare `Bearer` challenge. Only problems with the bearer access
 * token itself get an attribute: `invalid_request` for a malformed one or one sent in the URL,
 * `invalid_token` for one that does not verify, has expired, was revoked (D41), or whose credential
 * was deactivated (the token is revoked in effect). No attribute when no token was sent (as RFC 6750 asks), at
 * login (its credentials are a username and password, not a bearer token), and for the
 * refresh-token codes: the bearer token was accepted, the refused token is a body member, and
 * `invalid_token` would tell a client to drop an access token that still works.
 */
const BEARER_ERRORS: Record<UnauthorizedCode, 'invalid_request' | 'invalid_token' | null> = {
  authentication_failed: null,
  token_missing: null,
  token_malformed: 'invalid_request',
  token_invalid: 'invalid_token',
  token_expired: 'invalid_token',
  token_revoked: 'invalid_token',
  token_in_url: 'invalid_request',
  credential_inactive: 'invalid_token',
  refresh_token_invalid: null,
  refresh_token_expired: null,
  refresh_token_revoked: null,
};

const CHALLENGES = new Map<ErrorCode, string>(
  Object.entries(BEARER_ERRORS).map(([code, error]) => [code as ErrorCode, error === null ? 'Bearer' : `Bearer error="${error}"`]),
);

/** The `WWW-Authenticate` value of an error with this code: a Bearer challenge for 401s, else undefined. */
export function bearerChallenge(code: ErrorCode): string | undefined {
  return CHALLENGES.get(code);
}

/** When each code is answered, in one line: the OpenAPI description lists these (the API guide says more). */
export const ERROR_DESCRIPTIONS: Record<ErrorCode, string> = {
  malformed_request:
    'The HTTP request itself is broken: bad framing, no Host header on HTTP/1.1, an undecodable URL, a body that does not match its Content-Length.',
  malformed_json: 'The body is not valid JSON.',
  empty_body: 'Content-Type application/json with an empty body.',
  validation_failed: 'A field or query parameter breaks a rule; details.fields says which.',
  authentication_failed: "Login: wrong username or password, deactivated credential, or an address outside the credential's ranges (one answer for all).",
  token_missing: 'No Authorization header.',
  token_malformed: 'Authorization is not exactly "Bearer <token>".',
  token_invalid: 'The access token does not verify: forged, altered, from the other environment, an ID token, an unknown credential.',
  token_expired: 'The access token is past its expiry.',
  token_revoked: "The access token's session has ended: its credential was deactivated or its password changed since the token was issued (D41). Log in again.",
  token_in_url: 'A token in the URL; treat it as leaked.',
  credential_inactive: 'The operator deactivated the credential.',
  refresh_token_invalid: 'The refresh token is unknown, malformed or of another credential (at logout also: already revoked).',
  refresh_token_expired: 'The refresh token is past its lifetime.',
  refresh_token_revoked:
    'The session was logged out, an old refresh token was presented after its grace period (the session is now revoked), or the session ended with its credential (deactivated or password changed, D41).',
  https_required: 'The request came over plain HTTP.',
  address_not_allowed: "The client address is not in the environment's allowlist.",
  permission_denied: 'The credential lacks the permission, calls from outside its own address ranges, or asks to reveal a card another credential created.',
  not_found: 'No such path.',
  method_not_allowed: 'Known path, other method; Allow lists the accepted one.',
  request_timeout: "The request's headers or body did not arrive in time.",
  idempotency_in_progress: 'A request with the same requestId is still being processed; retry after Retry-After with the same requestId.',
  body_too_large: 'The body is over the size limit.',
  url_too_long: 'The URL is over the length limit.',
  unsupported_media_type: 'A body that is not application/json.',
  rate_limited: 'A rate limit or the failed-login lockout; retry after Retry-After.',
  headers_too_large: 'The request headers are over the size limit.',
  internal_error: 'An unexpected failure inside the gateway; no detail is given.',
  record_unreadable: 'The stored record of a card cannot be decrypted (an operator key problem).',
  connector_unavailable: 'The card processor refused, dropped the connection or answered with an error; retry with the same requestId.',
  connector_invalid_answer: "The card processor's answer was not a valid card record; retry with the same requestId.",
  shutting_down: 'This gateway instance is shutting down; retry on a new connection.',
  store_unavailable: "The gateway's shared store does not answer; retry after Retry-After.",
  audit_unavailable: 'The audit trail cannot be written, so audited operations pause; retry after Retry-After.',
  server_busy: 'Too many password checks at once (login); retry after Retry-After.',
  connector_timeout: 'The card processor did not answer in time; retry with the same requestId.',
};

/** At most this many field problems are listed in one answer (D29). */
export const MAX_LISTED_FIELDS = 20;

export class GatewayError extends Error {
  readonly status: number;
  readonly code: ErrorCode;
  readonly details: ErrorDetails;
  /** Seconds; rendered as `retryAfter` and the `Retry-After` header (D11, D17, D23). */
  readonly retryAfter: number | undefined;
  readonly headers: Record<string, string>;

  constructor(
    code: ErrorCode,
    message: string,
    options: { details?: ErrorDetails; retryAfter?: number; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    // A catalogue error is an answer, not a bug: no stack trace is captured (it was a measurable
    // part of every refused request under a flood). A 5xx keeps its cause, with the cause's stack.
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message, { cause: options.cause });
    Error.stackTraceLimit = limit;
    this.name = 'GatewayError';
    this.status = ERROR_CODES[code];
    this.code = code;
    this.details = options.details ?? {};
    this.retryAfter = options.retryAfter === undefined ? undefined : Math.max(1, Math.ceil(options.retryAfter));
    this.headers = options.headers ?? {};
  }
}

/** Field problems as details: the first MAX_LISTED_FIELDS, and a count of the rest (`alsoOmitted`: ones the caller already left out). */
function fieldDetails(fields: readonly FieldProblem[], alsoOmitted: number): ErrorDetails {
  const omitted = Math.max(0, fields.length - MAX_LISTED_FIELDS) + alsoOmitted;
  return omitted === 0 ? { fields: [...fields] } : { fields: fields.slice(0, MAX_LISTED_FIELDS), fieldsOmitted: omitted };
}

export const errors = {
  malformedRequest: (message = 'Malformed HTTP request') => new GatewayError('malformed_request', message),
  httpsRequired: () => new GatewayError('https_required', 'HTTPS is required'),
  addressNotAllowed: () => new GatewayError('address_not_allowed', 'Client address is not allowed'),
  notFound: () => new GatewayError('not_found', 'Resource not found'),
  methodNotAllowed: (allow: string) => new GatewayError('method_not_allowed', 'Method not allowed', { headers: { allow } }),
  requestTimeout: () => new GatewayError('request_timeout', 'Request timeout'),
  validation: (fields: readonly FieldProblem[], alsoOmitted = 0) =>
    new GatewayError('validation_failed', 'Request validation failed', { details: fieldDetails(fields, alsoOmitted) }),
  malformedJson: () => new GatewayError('malformed_json', 'Request body is not valid JSON'),
  emptyBody: () => new GatewayError('empty_body', 'Request body is empty'),
  bodyTooLarge: () => new GatewayError('body_too_large', 'Request body is too large'),
  urlTooLong: () => new GatewayError('url_too_long', 'Request URL is too long'),
  headersTooLarge: () => new GatewayError('headers_too_large', 'Request headers are too large'),
  unsupportedMediaType: () => new GatewayError('unsupported_media_type', 'Content-Type must be application/json'),
  authenticationFailed: () => new GatewayError('authentication_failed', 'Authentication failed'),
  tokenMissing: () => new GatewayError('token_missing', 'Authorization header is missing'),
  tokenMalformed: () => new GatewayError('token_malformed', 'Authorization header must be "Bearer <token>"'),
  tokenInvalid: () => new GatewayError('token_invalid', 'Access token is invalid'),
  tokenExpired: () => new GatewayError('token_expired', 'Access token is expired'),
  tokenRevoked: () => new GatewayError('token_revoked', 'Access token is revoked: log in again'),
  tokenInUrl: () => new GatewayError('token_in_url', 'Tokens are not accepted in the URL'),
  credentialInactive: () => new GatewayError('credential_inactive', 'Credential is inactive'),
  refreshTokenInvalid: (message = 'Refresh token is invalid') => new GatewayError('refresh_token_invalid', message),
  refreshTokenExpired: () => new GatewayError('refresh_token_expired', 'Refresh token is expired'),
  refreshTokenRevoked: () => new GatewayError('refresh_token_revoked', 'Refresh token is revoked'),
  permissionDenied: (message = 'Permission denied') => new GatewayError('permission_denied', message),
  rateLimited: (retryAfter: number, headers: Record<string, string> = {}) =>
    new GatewayError('rate_limited', 'Rate limit exceeded, retry later', { retryAfter, headers }),
  /** D11a: a locked-out username is answered like a rate limit; only its retryAfter is longer. */
  lockedOut: (retryAfter: number, headers: Record<string, string> = {}) =>
    new GatewayError('rate_limited', 'Rate limit exceeded, retry later', { retryAfter, headers }),
  idempotencyInProgress: (retryAfter: number) =>
    new GatewayError('idempotency_in_progress', 'A request with this requestId is still being processed', { retryAfter }),
  shuttingDown: () => new GatewayError('shutting_down', 'Service is shutting down, retry on another connection', { retryAfter: 1 }),
  storeUnavailable: (cause?: unknown) => new GatewayError('store_unavailable', 'Service temporarily unavailable', { retryAfter: 1, cause }),
  auditUnavailable: () => new GatewayError('audit_unavailable', 'Audit trail unavailable, retry later', { retryAfter: 5 }),
  serverBusy: () => new GatewayError('server_busy', 'Too many logins in progress, retry shortly', { retryAfter: 1 }),
  connectorUnavailable: (cause?: unknown) => new GatewayError('connector_unavailable', 'Card processor error', { cause }),
  connectorInvalidAnswer: (cause?: unknown) => new GatewayError('connector_invalid_answer', 'Card processor error', { cause }),
  connectorTimeout: (cause?: unknown) => new GatewayError('connector_timeout', 'Card processor did not answer in time', { cause }),
  recordUnreadable: (cause?: unknown) => new GatewayError('record_unreadable', 'Stored card record cannot be read', { cause }),
  internal: (cause?: unknown) => new GatewayError('internal_error', 'Internal error', { cause }),
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
