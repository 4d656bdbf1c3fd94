/**
 * The gateway's error catalogue: every error a client can see, each written once with its
 * status, public message, one-line description, retry advice and, for a 401, its Bearer
 * challenge. The `errors` factories, the OpenAPI description (envelope enum, per-response
 * code lists and examples) and the client's generated code table (client/src/error-codes.ts)
 * all derive from it. Clients branch on the code (D36); messages may be reworded.
 */

/** The statuses the gateway answers errors with. */
export type ErrorStatus = 400 | 401 | 403 | 404 | 405 | 408 | 409 | 413 | 414 | 415 | 429 | 431 | 500 | 502 | 503 | 504;

/**
 * What a client may do after the answer (docs/api-guide.md, "Retrying safely"):
 * - `no`: final, repeating the request unchanged cannot help;
 * - `retry_after`: repeat after the answer's Retry-After (it always carries one);
 * - `same_request_id`: repeat with backoff, a card creation with the same requestId (the
 *   first attempt may have made the card; the requestId makes the retry safe, D17);
 * - `retry_after_same_request_id`: both.
 */
export type RetryAdvice = 'no' | 'retry_after' | 'same_request_id' | 'retry_after_same_request_id';

/**
 * The RFC 6750 (section 3.1) `error` attribute of a 401's `WWW-Authenticate: Bearer` challenge;
 * `null`: a bare `Bearer`. Only problems with the bearer access token itself get an attribute:
 * `invalid_request` for a malformed one or one sent in the URL, `invalid_token` for one that
 * does not verify, has expired, was revoked (D41), or whose credential was deactivated (the
 * token is revoked in effect). None when no token was sent (as RFC 6750 asks), at login (its
 * credentials are a username and password, not a bearer token), and for the refresh-token
 * codes: the bearer token was accepted, the refused token is a body member, and
 * `invalid_token` would tell a client to drop an access token that still works.
 */
export type BearerError = 'invalid_request' | 'invalid_token';

interface EntryText {
  /** The public message of the envelope; a factory may word one case more precisely. */
  message: string;
  /** When the code is answered, in one line (the OpenAPI description lists these). */
  description: string;
  retry: RetryAdvice;
  /** The Retry-After seconds of a code whose wait is fixed (the others compute theirs). */
  retryAfterSeconds?: number;
}

/** A 401 always names its challenge (HTTP requires one on every 401); no other status has one. */
export type CatalogueEntry = EntryText & ({ status: 401; challenge: BearerError | null } | { status: Exclude<ErrorStatus, 401>; challenge?: undefined });

export const ERROR_CATALOGUE = {
  malformed_request: {
    status: 400,
    message: 'Malformed HTTP request',
    description:
      'The HTTP request itself is broken: bad framing, no Host header on HTTP/1.1, an undecodable URL, a body that does not match its Content-Length.',
    retry: 'no',
  },
  malformed_json: { status: 400, message: 'Request body is not valid JSON', description: 'The body is not valid JSON.', retry: 'no' },
  empty_body: { status: 400, message: 'Request body is empty', description: 'Content-Type application/json with an empty body.', retry: 'no' },
  validation_failed: {
    status: 400,
    message: 'Request validation failed',
    description: 'A field or query parameter breaks a rule; details.fields says which.',
    retry: 'no',
  },
  invalid_cursor: {
    status: 400,
    message: 'The cursor is not valid for this listing',
    description: 'The cursor was altered, forged, expired with its key, or belongs to another account or to other filters; start again from the first page.',
    retry: 'no',
  },
  authentication_failed: {
    status: 401,
    message: 'Authentication failed',
    description: "Login: wrong username or password, deactivated credential, or an address outside the credential's ranges (one answer for all).",
    retry: 'no',
    challenge: null,
  },
  token_missing: { status: 401, message: 'Authorization header is missing', description: 'No Authorization header.', retry: 'no', challenge: null },
  token_malformed: {
    status: 401,
    message: 'Authorization header must be "Bearer <token>"',
    description: 'Authorization is not exactly "Bearer <token>".',
    retry: 'no',
    challenge: 'invalid_request',
  },
  token_invalid: {
    status: 401,
    message: 'Access token is invalid',
    description: 'The access token does not verify: forged, altered, from the other environment, an ID token, an unknown credential.',
    retry: 'no',
    challenge: 'invalid_token',
  },
  token_expired: {
    status: 401,
    message: 'Access token is expired',
    description: 'The access token is past its expiry.',
    retry: 'no',
    challenge: 'invalid_token',
  },
  token_revoked: {
    status: 401,
    message: 'Access token is revoked: log in again',
    description: "The access token's session has ended: its credential was deactivated or its password changed since the token was issued (D41). Log in again.",
    retry: 'no',
    challenge: 'invalid_token',
  },
  token_in_url: {
    status: 401,
    message: 'Tokens are not accepted in the URL',
    description: 'A token in the URL; treat it as leaked.',
    retry: 'no',
    challenge: 'invalid_request',
  },
  credential_inactive: {
    status: 401,
    message: 'Credential is inactive',
    description: 'The operator deactivated the credential.',
    retry: 'no',
    challenge: 'invalid_token',
  },
  refresh_token_invalid: {
    status: 401,
    message: 'Refresh token is invalid',
    description: 'The refresh token is unknown, malformed or of another credential.',
    retry: 'no',
    challenge: null,
  },
  refresh_token_expired: {
    status: 401,
    message: 'Refresh token is expired',
    description: 'The refresh token is past its lifetime.',
    retry: 'no',
    challenge: null,
  },
  refresh_token_revoked: {
    status: 401,
    message: 'Refresh token is revoked',
    description:
      'The session was logged out, an old refresh token was presented after its grace period (the session is now revoked), or the session ended with its credential (deactivated or password changed, D41); at refresh and at logout alike.',
    retry: 'no',
    challenge: null,
  },
  https_required: { status: 403, message: 'HTTPS is required', description: 'The request came over plain HTTP.', retry: 'no' },
  address_not_allowed: {
    status: 403,
    message: 'Client address is not allowed',
    description: "The client address is not in the environment's allowlist.",
    retry: 'no',
  },
  permission_denied: {
    status: 403,
    message: 'Permission denied',
    description: 'The credential lacks the permission, calls from outside its own address ranges, or asks to reveal a card another credential created.',
    retry: 'no',
  },
  not_found: { status: 404, message: 'Resource not found', description: 'No such path.', retry: 'no' },
  card_not_found: {
    status: 404,
    message: 'Card not found',
    description: "No card with this id in the caller's issuing account: unknown, malformed, or another account's card (one answer for all three).",
    retry: 'no',
  },
  event_not_found: {
    status: 404,
    message: 'Event not found',
    description: "No event with this id in the caller's issuing account: unknown, malformed, past its retention, or another account's event (one answer for all).",
    retry: 'no',
  },
  method_not_allowed: {
    status: 405,
    message: 'Method not allowed',
    description: 'Known path, other method; Allow lists the accepted one.',
    retry: 'no',
  },
  request_timeout: { status: 408, message: 'Request timeout', description: "The request's headers or body did not arrive in time.", retry: 'no' },
  idempotency_in_progress: {
    status: 409,
    message: 'A request with this requestId is still being processed',
    description: 'A request with the same requestId is still being processed; retry after Retry-After with the same requestId.',
    retry: 'retry_after_same_request_id',
  },
  card_canceled: {
    status: 409,
    message: 'The card is canceled; its status cannot change',
    description: 'The card is canceled, which is final: no status change is possible.',
    retry: 'no',
  },
  body_too_large: { status: 413, message: 'Request body is too large', description: 'The body is over the size limit.', retry: 'no' },
  url_too_long: { status: 414, message: 'Request URL is too long', description: 'The URL is over the length limit.', retry: 'no' },
  unsupported_media_type: {
    status: 415,
    message: 'Content-Type must be application/json',
    description: 'A body that is not application/json.',
    retry: 'no',
  },
  rate_limited: {
    status: 429,
    message: 'Rate limit exceeded, retry later',
    description: "A rate limit, the failed-login lockout, or the client address's budget at one gateway instance (any operation); retry after Retry-After.",
    retry: 'retry_after',
  },
  headers_too_large: {
    status: 431,
    message: 'Request headers are too large',
    description: 'The request headers are over the size limit.',
    retry: 'no',
  },
  internal_error: {
    status: 500,
    message: 'Internal error',
    description: 'An unexpected failure inside the gateway; no detail is given.',
    retry: 'no',
  },
  record_unreadable: {
    status: 500,
    message: 'Stored card record cannot be read',
    description: 'The stored record of a card cannot be decrypted (an operator key problem).',
    retry: 'no',
  },
  connector_unavailable: {
    status: 502,
    message: 'Card processor error',
    description: 'The card processor refused, dropped the connection or answered with an error; retry with the same requestId.',
    retry: 'same_request_id',
  },
  connector_invalid_answer: {
    status: 502,
    message: 'Card processor error',
    description: "The card processor's answer was not a valid card record; retry with the same requestId.",
    retry: 'same_request_id',
  },
  shutting_down: {
    status: 503,
    message: 'Service is shutting down, retry on another connection',
    description: 'This gateway instance is shutting down; retry on a new connection.',
    retry: 'retry_after',
    retryAfterSeconds: 1,
  },
  store_unavailable: {
    status: 503,
    message: 'Service temporarily unavailable',
    description: "The gateway's shared store does not answer; retry after Retry-After.",
    retry: 'retry_after',
    retryAfterSeconds: 1,
  },
  audit_unavailable: {
    status: 503,
    message: 'Audit trail unavailable, retry later',
    description: 'The audit trail cannot be written, so audited operations pause; retry after Retry-After.',
    retry: 'retry_after',
    retryAfterSeconds: 5,
  },
  server_busy: {
    status: 503,
    message: 'Too many logins in progress, retry shortly',
    description: 'Too many password checks at once (login); retry after Retry-After.',
    retry: 'retry_after',
    retryAfterSeconds: 1,
  },
  connector_timeout: {
    status: 504,
    message: 'Card processor did not answer in time',
    description: 'The card processor did not answer in time; retry with the same requestId.',
    retry: 'same_request_id',
  },
} as const satisfies Record<string, CatalogueEntry>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

/** Every code, in catalogue order (grouped by status, ascending). */
export const ALL_ERROR_CODES = Object.keys(ERROR_CATALOGUE) as readonly ErrorCode[];

/** Every code with its status: the lookup the envelope, the tests and the client's table use. */
export const ERROR_CODES = Object.fromEntries(ALL_ERROR_CODES.map((code) => [code, ERROR_CATALOGUE[code].status])) as {
  readonly [C in ErrorCode]: (typeof ERROR_CATALOGUE)[C]['status'];
};

/** The catalogue entry of a code, widened to the common shape (for code that reads any entry). */
export const catalogueEntry = (code: ErrorCode): CatalogueEntry => ERROR_CATALOGUE[code];

/** The repeat is allowed at all (every advice but `no`). */
export const isRetryable = (code: ErrorCode): boolean => ERROR_CATALOGUE[code].retry !== 'no';

/** The answer carries Retry-After (and the envelope's retryAfter). */
export const carriesRetryAfter = (code: ErrorCode): boolean => ERROR_CATALOGUE[code].retry.startsWith('retry_after');

const CHALLENGES = new Map<ErrorCode, string>(
  ALL_ERROR_CODES.flatMap((code) => {
    const entry = catalogueEntry(code);
    if (entry.status !== 401) return [];
    return [[code, entry.challenge === null ? 'Bearer' : `Bearer error="${entry.challenge}"`] as const];
  }),
);

/** The `WWW-Authenticate` value of an error with this code: a Bearer challenge for 401s, else undefined. */
export function bearerChallenge(code: ErrorCode): string | undefined {
  return CHALLENGES.get(code);
}
