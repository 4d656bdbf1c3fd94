/** The response headers the OpenAPI description documents, each described once. */

export type HeaderName =
  | 'X-Correlation-Id'
  | 'Cache-Control'
  | 'RateLimit-Policy'
  | 'RateLimit'
  | 'RateLimit-Limit'
  | 'RateLimit-Remaining'
  | 'RateLimit-Reset'
  | 'Retry-After'
  | 'Idempotent-Replayed'
  | 'Idempotency-Payload-Mismatch'
  | 'WWW-Authenticate'
  | 'Allow'
  | 'Connection';

/** One item of each structured-field list (RFC 8941): a quoted policy name and its integer parameters. */
const POLICY_ITEM = '"[a-z_]+";q=[0-9]+;w=[0-9]+';
const LIMIT_ITEM = '"[a-z_]+";r=[0-9]+;t=[0-9]+';

/** The headers of a rate-limited operation's answers (D11, D49): the draft's two, then the legacy three. */
export const RATE_LIMIT_HEADERS = [
  'RateLimit-Policy',
  'RateLimit',
  'RateLimit-Limit',
  'RateLimit-Remaining',
  'RateLimit-Reset',
] as const satisfies readonly HeaderName[];

export interface HeaderObject {
  description: string;
  required: boolean;
  schema: Record<string, unknown>;
}

export const HEADERS: Record<HeaderName, { description: string; schema: Record<string, unknown> }> = {
  'X-Correlation-Id': {
    description:
      "The request's id (a UUID of the gateway's, never the client's): on every answer, and the error envelope's correlationId. Log it and quote it to support.",
    schema: { type: 'string', format: 'uuid' },
  },
  'Cache-Control': {
    description: '`no-store` on answers that hold tokens or card data; `public, max-age=300` on the public keys.',
    schema: { type: 'string' },
  },
  'RateLimit-Policy': {
    description:
      'The limits this request was counted against, as draft-ietf-httpapi-ratelimit-headers (revision 11) defines the field: a structured-field list with one item per limit, `"<name>";q=<requests allowed per window>;w=<window in seconds>`, for example `"login_address";q=30;w=60, "login";q=5;w=60`. The names: `login` (per submitted username), `login_address` (per client address), `refresh` (per credential), `card_read` (reading and listing cards, per credential), `card_status` (card status changes, per credential), `address` (every request of a client address to one gateway instance, a window of 1 s; D53).',
    schema: { type: 'string', pattern: `^${POLICY_ITEM}(, ${POLICY_ITEM})*$` },
  },
  RateLimit: {
    description:
      'Where each of those limits stands after this request, as the same draft defines the field: `"<name>";r=<requests left in the window>;t=<seconds until the window ends>`, for example `"login";r=3;t=42`. `r=0`: the next request in this window is refused.',
    schema: { type: 'string', pattern: `^${LIMIT_ITEM}(, ${LIMIT_ITEM})*$` },
  },
  'RateLimit-Limit': {
    description:
      'Requests allowed in the current window of the limit that refused, or else of the limit closest to refusing (the older form of RateLimit-Policy).',
    schema: { type: 'integer', minimum: 0 },
  },
  'RateLimit-Remaining': { description: 'Requests left in that window (the older form of RateLimit).', schema: { type: 'integer', minimum: 0 } },
  'RateLimit-Reset': { description: 'Seconds until that window ends.', schema: { type: 'integer', minimum: 0 } },
  'Retry-After': {
    description: "Whole seconds to wait before retrying (at least 1); the envelope's retryAfter holds the same number.",
    schema: { type: 'integer', minimum: 1 },
  },
  'Idempotent-Replayed': {
    description: '`true` when the requestId was already used: the original card is answered and nothing is created.',
    schema: { type: 'string', enum: ['true'] },
  },
  'Idempotency-Payload-Mismatch': {
    description:
      '`true` when this requestId was first used with a different payload: the card answered is the original one, unchanged. Treat it as a bug in the client.',
    schema: { type: 'string', enum: ['true'] },
  },
  'WWW-Authenticate': {
    description:
      "The RFC 6750 Bearer challenge of every 401. The `error` attribute is set only for problems with the bearer access token itself; branch on the envelope's code, which is more precise.",
    schema: { type: 'string', enum: ['Bearer', 'Bearer error="invalid_request"', 'Bearer error="invalid_token"'] },
  },
  Allow: { description: 'The methods the path accepts.', schema: { type: 'string' } },
  Connection: {
    description:
      '`close` when the gateway closes the connection after this answer (broken HTTP, refusals for the allowlist, plain HTTP, an over-long URL or an oversized body, shutting down): open a new connection for the next request.',
    schema: { type: 'string' },
  },
};

/** The header's OpenAPI object, with its own description or a more specific one. */
export const header = (name: HeaderName, required: boolean, description?: string): HeaderObject => ({
  description: description ?? HEADERS[name].description,
  required,
  schema: { ...HEADERS[name].schema },
});
