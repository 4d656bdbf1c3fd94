import type { TSchema } from '@sinclair/typebox';
import { ALL_ERROR_CODES, ERROR_CATALOGUE, type ErrorCode, type ErrorStatus } from '../../foundation/error-catalogue.js';
import type { GatewayError } from '../../foundation/errors.js';
import type { ExampleObject } from './error-examples.js';
import type { HeaderName } from './headers.js';

/**
 * What a route imports to document itself: `documentedResponses` (spread into the route
 * schema), the code groups every route of a kind can answer, and the security requirements.
 * decorate.ts turns each declaration into the operation's OpenAPI responses.
 */

/** What an operation answers, beyond its body schemas; see `documentedResponses`. */
export interface ResponseDocs {
  success: {
    status: 200 | 201;
    description: string;
    /** Headers of the success answer besides X-Correlation-Id, and whether each is always there. */
    headers: Partial<Record<HeaderName, boolean>>;
    examples: Record<string, ExampleObject>;
  };
  /** Every code the operation can answer; the error statuses follow from the catalogue. */
  errors: readonly ErrorCode[];
  /** The operation has rate limits: the rate-limit headers on its success and on the errors that come after the limiter. */
  rateLimited?: boolean;
  /** Codes this operation answers after its limiter besides the usual ones (its own logic, error-responses.ts). */
  afterLimiter?: readonly ErrorCode[];
  /** OpenAPI links of the success answer: the operations its body leads to. */
  links?: Record<string, { operationId: string; parameters: Record<string, string>; description: string }>;
  /** Examples closer to the operation than the catalogue's (a validation problem of its own body). */
  errorExamples?: Partial<Record<ErrorCode, GatewayError>>;
}

/** The route-schema key the declaration travels under (the swagger plugin copies `x-` keys). */
export const RESPONSE_DOCS_KEY = 'x-gateway-responses';

declare module 'fastify' {
  interface FastifySchema {
    [RESPONSE_DOCS_KEY]?: ResponseDocs;
  }
}

/** The statuses of these codes, ascending, each with its codes in catalogue order. */
export function codesByStatus(codes: readonly ErrorCode[]): Map<ErrorStatus, ErrorCode[]> {
  const byStatus = new Map<ErrorStatus, ErrorCode[]>();
  for (const code of ALL_ERROR_CODES) {
    if (!codes.includes(code)) continue;
    const status = ERROR_CATALOGUE[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  return new Map([...byStatus].sort(([a], [b]) => a - b));
}

/**
 * A route's `response` schemas (the success body, the envelope for each error status) and the
 * declaration the OpenAPI description is decorated from: spread both into the route schema.
 */
export function documentedResponses(success: TSchema, docs: ResponseDocs): { response: Record<number, unknown>; [RESPONSE_DOCS_KEY]: ResponseDocs } {
  const response: Record<number, unknown> = { [docs.success.status]: success };
  for (const status of codesByStatus(docs.errors).keys()) response[status] = { $ref: 'ErrorEnvelope#' };
  return { response, [RESPONSE_DOCS_KEY]: docs };
}

/** Security requirements of an operation: the bearer access token, or none (`[]`, public). */
export const BearerSecurity = [{ bearerAuth: [] }];
export const PublicSecurity: { bearerAuth: string[] }[] = [];

/**
 * Transport-level codes any request can get, whatever its route: listed by every operation.
 * `rate_limited` is among them: the per-address budget (D53) answers 429 before any route runs.
 */
export const TRANSPORT_CODES = [
  'malformed_request',
  'https_required',
  'address_not_allowed',
  'request_timeout',
  'url_too_long',
  'headers_too_large',
  'token_in_url',
  'rate_limited',
  'shutting_down',
] as const satisfies readonly ErrorCode[];
/** Codes of a route that takes a JSON body. */
export const BODY_CODES = [
  'malformed_json',
  'empty_body',
  'validation_failed',
  'body_too_large',
  'unsupported_media_type',
] as const satisfies readonly ErrorCode[];
/** Codes of a route behind the bearer guard. */
export const BEARER_CODES = [
  'token_missing',
  'token_malformed',
  'token_invalid',
  'token_expired',
  'token_revoked',
  'credential_inactive',
  'permission_denied',
] as const satisfies readonly ErrorCode[];
/** What a card operation after creation answers when the connector fails: creation's 502/504 (D19). */
export const CARD_CONNECTOR_CODES = ['connector_unavailable', 'connector_invalid_answer', 'connector_timeout'] as const satisfies readonly ErrorCode[];
