import { bearerChallenge, carriesRetryAfter, ERROR_CATALOGUE, type ErrorCode, type ErrorStatus } from '../../foundation/error-catalogue.js';
import type { GatewayError } from '../../foundation/errors.js';
import { errorExamples } from './error-examples.js';
import { REFUSALS_BEFORE_CLOSE } from '../request-budget.js';
import { header, HEADERS, RATE_LIMIT_HEADERS, type HeaderObject } from './headers.js';

/** One error response of an operation: the status's codes, described, with their headers and an example each. */

export interface MediaObject {
  schema?: Record<string, unknown>;
  examples?: Record<string, { summary: string; value: unknown }>;
}
export interface ResponseObject {
  description: string;
  headers?: Record<string, HeaderObject>;
  content?: Record<string, MediaObject>;
  links?: Record<string, unknown>;
}

const ordinal = (n: number): string => ['first', 'second', 'third', 'fourth', 'fifth'][n - 1] ?? `${n}th`;

/**
 * Codes whose answers always close the connection (`Connection: close`); besides these, the
 * per-address 429 after REFUSALS_BEFORE_CLOSE on one connection. docs/api-guide.md names the
 * same list (a test keeps them equal, and the answers to what they say).
 */
export const CLOSING_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'malformed_request',
  'https_required',
  'address_not_allowed',
  'request_timeout',
  'body_too_large',
  'url_too_long',
  'headers_too_large',
  'shutting_down',
]);
/** Codes a rate-limited route can answer after its limiter ran (route-policy.ts: a preHandler). */
const AFTER_THE_LIMITER: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'authentication_failed',
  'refresh_token_invalid',
  'refresh_token_expired',
  'refresh_token_revoked',
  'rate_limited',
  'server_busy',
  'store_unavailable',
  'internal_error',
]);

const STATUS_TEXT: Record<ErrorStatus, string> = {
  400: 'Bad request',
  401: 'Unauthenticated',
  403: 'Forbidden',
  404: 'Not found',
  405: 'Method not allowed',
  408: 'Request timeout',
  409: 'Conflict',
  413: 'Body too large',
  414: 'URL too long',
  415: 'Unsupported media type',
  429: 'Too many requests',
  431: 'Request headers too large',
  500: 'Internal error',
  502: 'Bad gateway',
  503: 'Service unavailable',
  504: 'Gateway timeout',
};

export const ENVELOPE_REF = { $ref: '#/components/schemas/ErrorEnvelope' };

/** The headers of an error response with these codes. */
function errorHeaders(
  status: ErrorStatus,
  codes: readonly ErrorCode[],
  rateLimited: boolean,
  afterLimiter: readonly ErrorCode[],
): Record<string, HeaderObject> {
  const headers: Record<string, HeaderObject> = { 'X-Correlation-Id': header('X-Correlation-Id', true) };
  if (status === 401) {
    const challengeOf = (code: ErrorCode): string => bearerChallenge(code) ?? 'Bearer';
    const mapping = codes.map((code) => `\`${code}\`: \`${challengeOf(code)}\``).join('; ');
    const challenge = header('WWW-Authenticate', true, `${HEADERS['WWW-Authenticate'].description} Here: ${mapping}.`);
    challenge.schema['enum'] = [...new Set(codes.map(challengeOf))].sort();
    headers['WWW-Authenticate'] = challenge;
  }
  const waiting = codes.filter(carriesRetryAfter);
  if (waiting.length > 0) headers['Retry-After'] = header('Retry-After', waiting.length === codes.length);
  if (status === 429) {
    // Every operation can be told 429 by the per-address budget (D53) before its route runs;
    // that refusal names its window unless it is for too many requests at once.
    const when = rateLimited
      ? " On every 429: the operation's own limit that refused, or the per-address budget (`address`); absent only on a per-address refusal for too many requests at once, which has no window."
      : ' On a 429 of the per-address budget (`address`) for requests a second; absent on one for too many requests at once, which has no window.';
    for (const name of RATE_LIMIT_HEADERS) headers[name] = header(name, false, `${HEADERS[name].description}${when}`);
  } else if (rateLimited && codes.some((code) => AFTER_THE_LIMITER.has(code) || afterLimiter.includes(code))) {
    // The errors of the route's own logic carry the headers of the limit the request passed
    // (other refusals come before the limiter).
    for (const name of RATE_LIMIT_HEADERS)
      headers[name] = header(name, false, `${HEADERS[name].description} Present when the request got as far as the rate limiter.`);
  }
  const closing = codes.filter((code) => CLOSING_CODES.has(code)).map((code) => `\`${code}\``);
  const closingText = closing.length > 0 ? [`on ${closing.join(', ')}`] : [];
  if (codes.includes('rate_limited')) closingText.push(`on the ${ordinal(REFUSALS_BEFORE_CLOSE)} per-address \`rate_limited\` in a row on one connection`);
  if (closingText.length > 0) {
    headers['Connection'] = header(
      'Connection',
      false,
      `\`close\` ${closingText.join(', and ')}: the gateway closes the connection after this answer; open a new one.`,
    );
  }
  return headers;
}

/** The response of one error status: its codes (catalogue descriptions), headers and examples. */
export function errorResponse(
  status: ErrorStatus,
  codes: readonly ErrorCode[],
  rateLimited: boolean,
  overrides: Partial<Record<ErrorCode, GatewayError>>,
  afterLimiter: readonly ErrorCode[] = [],
): ResponseObject {
  const lines = codes.map((code) => `- \`${code}\`: ${ERROR_CATALOGUE[code].description}`).join('\n');
  return {
    description: `${STATUS_TEXT[status]}. The envelope's \`code\` is one of:\n\n${lines}`,
    headers: errorHeaders(status, codes, rateLimited, afterLimiter),
    content: { 'application/json': { schema: { ...ENVELOPE_REF }, examples: errorExamples(codes, overrides) } },
  };
}
