// Generated from the gateway's error catalogue (src/foundation/error-catalogue.ts) by
// `npm run generate:client`. Do not edit: change the catalogue and regenerate (a test fails
// when this file is stale).

/**
 * What a client may do after an error answer (the API guide's "Retrying safely"):
 * - `no`: final, repeating the request unchanged cannot help;
 * - `retry_after`: repeat after the answer's Retry-After (it always carries one);
 * - `same_request_id`: repeat with backoff, a card creation with the same requestId;
 * - `retry_after_same_request_id`: both.
 */
export type GatewayRetryAdvice = 'no' | 'retry_after' | 'same_request_id' | 'retry_after_same_request_id';

/** Every `code` the gateway's error envelope can carry, with its HTTP status. */
export const GATEWAY_ERROR_CODES = {
  malformed_request: 400,
  malformed_json: 400,
  empty_body: 400,
  validation_failed: 400,
  invalid_cursor: 400,
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
  card_not_found: 404,
  event_not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  idempotency_in_progress: 409,
  card_canceled: 409,
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

export type GatewayErrorCode = keyof typeof GATEWAY_ERROR_CODES;

/** Each code's retry advice. */
export const GATEWAY_RETRY_ADVICE: { readonly [C in GatewayErrorCode]: GatewayRetryAdvice } = {
  malformed_request: 'no',
  malformed_json: 'no',
  empty_body: 'no',
  validation_failed: 'no',
  invalid_cursor: 'no',
  authentication_failed: 'no',
  token_missing: 'no',
  token_malformed: 'no',
  token_invalid: 'no',
  token_expired: 'no',
  token_revoked: 'no',
  token_in_url: 'no',
  credential_inactive: 'no',
  refresh_token_invalid: 'no',
  refresh_token_expired: 'no',
  refresh_token_revoked: 'no',
  https_required: 'no',
  address_not_allowed: 'no',
  permission_denied: 'no',
  not_found: 'no',
  card_not_found: 'no',
  event_not_found: 'no',
  method_not_allowed: 'no',
  request_timeout: 'no',
  idempotency_in_progress: 'retry_after_same_request_id',
  card_canceled: 'no',
  body_too_large: 'no',
  url_too_long: 'no',
  unsupported_media_type: 'no',
  rate_limited: 'retry_after',
  headers_too_large: 'no',
  internal_error: 'no',
  record_unreadable: 'no',
  connector_unavailable: 'same_request_id',
  connector_invalid_answer: 'same_request_id',
  shutting_down: 'retry_after',
  store_unavailable: 'retry_after',
  audit_unavailable: 'retry_after',
  server_busy: 'retry_after',
  connector_timeout: 'same_request_id',
};
