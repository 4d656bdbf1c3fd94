import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import { Type, type TSchema } from '@sinclair/typebox';
import {
  bearerChallenge,
  ERROR_CODES,
  ERROR_DESCRIPTIONS,
  errors,
  toEnvelope,
  type ErrorCode,
  MAX_LISTED_FIELDS,
  type GatewayError,
} from '../foundation/errors.js';

/**
 * The route schemas' share of the OpenAPI description: the error envelope, the response headers,
 * and the per-operation declaration of what each operation answers (`documentedResponses`).
 * Fastify validates and serialises with the plain schemas; `decorateOpenApi` (the swagger
 * plugin's transformObject) turns each operation's declaration into documented headers,
 * examples and error codes, and names the body schemas in `components.schemas`.
 */

const codeList = (Object.keys(ERROR_CODES) as ErrorCode[]).map((code) => `- \`${code}\` (${ERROR_CODES[code]}): ${ERROR_DESCRIPTIONS[code]}`).join('\n');

/** The error envelope as a response schema: every error answer of every operation. */
export const ErrorEnvelopeSchema = Type.Object(
  {
    correlationId: Type.String({ format: 'uuid', description: "The request's id, the same as the X-Correlation-Id header; quote it to support." }),
    status: Type.Integer({ minimum: 400, maximum: 599, description: 'The HTTP status.' }),
    code: Type.String({
      enum: Object.keys(ERROR_CODES),
      description: `Stable machine-readable name of the error: branch on it (messages may be reworded). Every code, with its status:\n\n${codeList}`,
    }),
    message: Type.String({ description: 'Short human text; never parse it. A 5xx never says more than its code.' }),
    details: Type.Object(
      {
        fields: Type.Optional(
          Type.Array(Type.Object({ path: Type.String(), message: Type.String() }), {
            maxItems: MAX_LISTED_FIELDS,
            description: `validation_failed: the fields (or query parameters) that break a rule, at most ${MAX_LISTED_FIELDS}.`,
          }),
        ),
        fieldsOmitted: Type.Optional(Type.Integer({ minimum: 1, description: `Field problems found beyond the ${MAX_LISTED_FIELDS} listed.` })),
      },
      { additionalProperties: true, description: 'Empty ({}) except for validation_failed.' },
    ),
    timestamp: Type.String({ format: 'date-time', description: 'ISO 8601 UTC instant.' }),
    retryAfter: Type.Optional(Type.Integer({ minimum: 1, description: 'Seconds to wait before retrying, as in Retry-After (409, 429 and 503 answers only).' })),
  },
  { $id: 'ErrorEnvelope', title: 'ErrorEnvelope', description: 'Every error answer, whatever produced it.' },
);

/** Security requirements of an operation: the bearer access token, or none (`[]`, public). */
export const BearerSecurity = [{ bearerAuth: [] }];
export const PublicSecurity: { bearerAuth: string[] }[] = [];

// ---------------------------------------------------------------------------------------------
// Response headers

export type HeaderName =
  | 'X-Correlation-Id'
  | 'Cache-Control'
  | 'RateLimit-Limit'
  | 'RateLimit-Remaining'
  | 'RateLimit-Reset'
  | 'Retry-After'
  | 'Idempotent-Replayed'
  | 'Idempotency-Payload-Mismatch'
  | 'WWW-Authenticate'
  | 'Allow'
  | 'Connection';

interface HeaderObject {
  description: string;
  required: boolean;
  schema: Record<string, unknown>;
}

const HEADERS: Record<HeaderName, { description: string; schema: Record<string, unknown> }> = {
  'X-Correlation-Id': {
    description:
      "The request's id (a UUID of the gateway's, never the client's): on every answer, and the error envelope's correlationId. Log it and quote it to support.",
    schema: { type: 'string', format: 'uuid' },
  },
  'Cache-Control': {
    description: '`no-store` on answers that hold tokens or card data; `public, max-age=300` on the public keys.',
    schema: { type: 'string' },
  },
  'RateLimit-Limit': { description: 'Requests allowed in the current window of the limit closest to refusing.', schema: { type: 'integer', minimum: 0 } },
  'RateLimit-Remaining': { description: 'Requests left in that window.', schema: { type: 'integer', minimum: 0 } },
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

const header = (name: HeaderName, required: boolean, description?: string): HeaderObject => ({
  description: description ?? HEADERS[name].description,
  required,
  schema: { ...HEADERS[name].schema },
});

/** Codes whose answers close the connection (`Connection: close`). */
const CLOSING_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'malformed_request',
  'https_required',
  'address_not_allowed',
  'request_timeout',
  'body_too_large',
  'url_too_long',
  'headers_too_large',
  'shutting_down',
]);
const RETRY_AFTER_STATUSES: ReadonlySet<number> = new Set([409, 429, 503]);
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

/** The headers of an error response with these codes. */
function errorHeaders(status: number, codes: readonly ErrorCode[], rateLimited: boolean): Record<string, HeaderObject> {
  const headers: Record<string, HeaderObject> = { 'X-Correlation-Id': header('X-Correlation-Id', true) };
  if (status === 401) {
    const challengeOf = (code: ErrorCode): string => bearerChallenge(code) ?? 'Bearer';
    const mapping = codes.map((code) => `\`${code}\`: \`${challengeOf(code)}\``).join('; ');
    const challenge = header('WWW-Authenticate', true, `${HEADERS['WWW-Authenticate'].description} Here: ${mapping}.`);
    challenge.schema['enum'] = [...new Set(codes.map(challengeOf))].sort();
    headers['WWW-Authenticate'] = challenge;
  }
  if (RETRY_AFTER_STATUSES.has(status)) headers['Retry-After'] = header('Retry-After', true);
  if (rateLimited && codes.some((code) => AFTER_THE_LIMITER.has(code))) {
    // A 429 always says which limit refused; the errors of the route's own logic carry the
    // headers of the limit the request passed (other refusals come before the limiter).
    const required = status === 429;
    const when = required ? '' : ' Present when the request got as far as the rate limiter.';
    for (const name of ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'] as const)
      headers[name] = header(name, required, `${HEADERS[name].description}${when}`);
  }
  if (codes.some((code) => CLOSING_CODES.has(code))) {
    const closing = codes.filter((code) => CLOSING_CODES.has(code)).map((code) => `\`${code}\``);
    headers['Connection'] = header(
      'Connection',
      false,
      `\`close\` on ${closing.join(', ')}: the gateway closes the connection after this answer; open a new one.`,
    );
  }
  return headers;
}

// ---------------------------------------------------------------------------------------------
// Examples

const EXAMPLE_CORRELATION_ID = '4c9f06f3-54e0-49af-9550-1b5de006fa75';
const EXAMPLE_INSTANT = Date.UTC(2026, 10, 23, 21, 13, 33, 542);

/** One error per code, as the gateway words it: the examples of the error responses. */
const EXAMPLE_ERRORS: Record<ErrorCode, GatewayError> = {
  malformed_request: errors.malformedRequest(),
  malformed_json: errors.malformedJson(),
  empty_body: errors.emptyBody(),
  validation_failed: errors.validation([{ path: 'cardLimit', message: 'must be >= 1' }]),
  authentication_failed: errors.authenticationFailed(),
  token_missing: errors.tokenMissing(),
  token_malformed: errors.tokenMalformed(),
  token_invalid: errors.tokenInvalid(),
  token_expired: errors.tokenExpired(),
  token_revoked: errors.tokenRevoked(),
  token_in_url: errors.tokenInUrl(),
  credential_inactive: errors.credentialInactive(),
  refresh_token_invalid: errors.refreshTokenInvalid(),
  refresh_token_expired: errors.refreshTokenExpired(),
  refresh_token_revoked: errors.refreshTokenRevoked(),
  https_required: errors.httpsRequired(),
  address_not_allowed: errors.addressNotAllowed(),
  permission_denied: errors.permissionDenied('Permission cards:create is required'),
  not_found: errors.notFound(),
  method_not_allowed: errors.methodNotAllowed('POST'),
  request_timeout: errors.requestTimeout(),
  idempotency_in_progress: errors.idempotencyInProgress(3),
  body_too_large: errors.bodyTooLarge(),
  url_too_long: errors.urlTooLong(),
  unsupported_media_type: errors.unsupportedMediaType(),
  rate_limited: errors.rateLimited(42),
  headers_too_large: errors.headersTooLarge(),
  internal_error: errors.internal(),
  record_unreadable: errors.recordUnreadable(),
  connector_unavailable: errors.connectorUnavailable(),
  connector_invalid_answer: errors.connectorInvalidAnswer(),
  shutting_down: errors.shuttingDown(),
  store_unavailable: errors.storeUnavailable(),
  audit_unavailable: errors.auditUnavailable(),
  server_busy: errors.serverBusy(),
  connector_timeout: errors.connectorTimeout(),
};

interface ExampleObject {
  summary: string;
  value: unknown;
}

function errorExamples(codes: readonly ErrorCode[], overrides: Partial<Record<ErrorCode, GatewayError>>): Record<string, ExampleObject> {
  return Object.fromEntries(
    codes.map((code) => [
      code,
      { summary: ERROR_DESCRIPTIONS[code], value: toEnvelope(overrides[code] ?? EXAMPLE_ERRORS[code], EXAMPLE_CORRELATION_ID, EXAMPLE_INSTANT) },
    ]),
  );
}

// ---------------------------------------------------------------------------------------------
// Per-operation declaration

/** What an operation answers, beyond its body schemas; see `documentedResponses`. */
export interface ResponseDocs {
  success: {
    status: 200 | 201;
    description: string;
    /** Headers of the success answer besides X-Correlation-Id, and whether each is always there. */
    headers: Partial<Record<HeaderName, boolean>>;
    examples: Record<string, ExampleObject>;
  };
  /** Every code the operation can answer; the error statuses follow from ERROR_CODES. */
  errors: readonly ErrorCode[];
  /** The operation has rate limits: RateLimit-* headers on its answers. */
  rateLimited?: boolean;
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
export function codesByStatus(codes: readonly ErrorCode[]): Map<number, ErrorCode[]> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of Object.keys(ERROR_CODES) as ErrorCode[]) {
    if (!codes.includes(code)) continue;
    const status = ERROR_CODES[code];
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

/** Transport-level codes any request can get, whatever its route: listed by every operation. */
export const TRANSPORT_CODES = [
  'malformed_request',
  'https_required',
  'address_not_allowed',
  'request_timeout',
  'url_too_long',
  'headers_too_large',
  'token_in_url',
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

// ---------------------------------------------------------------------------------------------
// The document

interface MediaObject {
  schema?: Record<string, unknown>;
  examples?: Record<string, ExampleObject>;
}
interface ResponseObject {
  description: string;
  headers?: Record<string, HeaderObject>;
  content?: Record<string, MediaObject>;
}
interface OperationObject {
  operationId?: string;
  requestBody?: { content?: Record<string, MediaObject> };
  responses?: Record<string, ResponseObject>;
  [RESPONSE_DOCS_KEY]?: ResponseDocs;
}
interface Document {
  paths?: Record<string, Record<string, OperationObject>>;
  components?: { schemas?: Record<string, Record<string, unknown>>; responses?: Record<string, ResponseObject> };
}

const STATUS_TEXT: Record<number, string> = {
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

const ENVELOPE_REF = { $ref: '#/components/schemas/ErrorEnvelope' };

function errorResponse(status: number, codes: readonly ErrorCode[], rateLimited: boolean, overrides: Partial<Record<ErrorCode, GatewayError>>): ResponseObject {
  const lines = codes.map((code) => `- \`${code}\`: ${ERROR_DESCRIPTIONS[code]}`).join('\n');
  return {
    description: `${STATUS_TEXT[status] ?? `Status ${status}`}. The envelope's \`code\` is one of:\n\n${lines}`,
    headers: errorHeaders(status, codes, rateLimited),
    content: { 'application/json': { schema: { ...ENVELOPE_REF }, examples: errorExamples(codes, overrides) } },
  };
}

/** Moves a titled inline schema into components.schemas and answers a reference to it. */
function named(document: Document, schema: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (schema === undefined || typeof schema['title'] !== 'string') return schema;
  const name = schema['title'];
  const schemas = (document.components ??= {}).schemas ?? (document.components.schemas = {});
  const existing = schemas[name];
  if (existing !== undefined && JSON.stringify(existing) !== JSON.stringify(schema)) throw new Error(`OpenAPI: two different schemas are titled ${name}`);
  schemas[name] = schema;
  return { $ref: `#/components/schemas/${name}` };
}

/**
 * The swagger plugin's transformObject: decorates every operation from its declaration
 * (headers, examples and codes of each response), names the titled body schemas, and adds the
 * answers that belong to no operation (404 for unknown paths, 405 for other methods).
 */
export function decorateOpenApi(document: Document): Document {
  for (const [path, item] of Object.entries(document.paths ?? {})) {
    for (const [method, operation] of Object.entries(item)) {
      const docs = operation[RESPONSE_DOCS_KEY];
      if (docs === undefined) throw new Error(`OpenAPI: ${method.toUpperCase()} ${path} has no ${RESPONSE_DOCS_KEY} declaration (use documentedResponses)`);
      delete operation[RESPONSE_DOCS_KEY];
      const responses = operation.responses ?? {};
      const media = operation.requestBody?.content?.['application/json'];
      if (media) media.schema = named(document, media.schema);

      const success = responses[String(docs.success.status)];
      if (!success) throw new Error(`OpenAPI: ${method.toUpperCase()} ${path} declares ${docs.success.status} without a schema`);
      const successHeaders: Record<string, HeaderObject> = { 'X-Correlation-Id': header('X-Correlation-Id', true) };
      for (const [name, required] of Object.entries(docs.success.headers) as [HeaderName, boolean][]) successHeaders[name] = header(name, required);
      const successMedia = success.content?.['application/json'] ?? {};
      responses[String(docs.success.status)] = {
        description: docs.success.description,
        headers: successHeaders,
        content: { 'application/json': { schema: named(document, successMedia.schema) ?? {}, examples: docs.success.examples } },
      };
      for (const [status, codes] of codesByStatus(docs.errors)) {
        responses[String(status)] = errorResponse(status, codes, docs.rateLimited === true, docs.errorExamples ?? {});
      }
      operation.responses = responses;
    }
  }
  const components = (document.components ??= {});
  components.responses = {
    NotFound: {
      description: 'No operation has this path: `not_found`, the answer to any request for an unknown path, whatever its method.',
      headers: { 'X-Correlation-Id': header('X-Correlation-Id', true) },
      content: { 'application/json': { schema: { ...ENVELOPE_REF }, examples: errorExamples(['not_found'], {}) } },
    },
    MethodNotAllowed: {
      description:
        "The path exists, the method does not (for example GET on a POST operation's path): `method_not_allowed`. `Allow` lists the methods the path accepts.",
      headers: { 'X-Correlation-Id': header('X-Correlation-Id', true), Allow: header('Allow', true) },
      content: { 'application/json': { schema: { ...ENVELOPE_REF }, examples: errorExamples(['method_not_allowed'], {}) } },
    },
  };
  return document;
}

const DESCRIPTION = `The card issuing gateway's public API: log in with operator-issued credentials, keep the session alive with refresh, and create virtual cards idempotently.

docs/api-guide.md in the repository explains the flows; this description is its exact reference.

- Every answer carries \`X-Correlation-Id\`. Every error is the \`ErrorEnvelope\` with a stable \`code\`; each response below lists the codes it can carry, with one example per code.
- Requests for a path that no operation has are answered with the \`NotFound\` response (\`not_found\`, 404), and a known path called with another method with \`MethodNotAllowed\` (\`method_not_allowed\`, 405, with \`Allow\`); see components.responses.
- Answers to broken HTTP and the refusals before routing (allowlist, plain HTTP, over-long URL or headers, timeouts, shutting down) can come before the request reaches any operation; they are listed under every operation.`;

/** The swagger plugin's options: OpenAPI 3.1, named schemas, servers, tags, and the decoration above. */
export function openApiOptions(version: string): FastifyDynamicSwaggerOptions {
  return {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'Card issuing gateway', version, description: DESCRIPTION },
      servers: [
        {
          url: 'https://{host}:{port}',
          description: "The environment's base address (sandbox or production), given by the operator. The defaults are the local gateway of `npm start`.",
          variables: {
            host: { default: '127.0.0.1', description: 'Host name of the environment.' },
            port: { default: '8443', description: 'TLS port of the environment.' },
          },
        },
      ],
      tags: [
        { name: 'auth', description: 'Sessions: log in, refresh, log out, and the public keys that verify ID tokens.' },
        { name: 'cards', description: 'Virtual cards.' },
      ],
      components: {
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'JWT',
            description: 'The accessToken of login or refresh, as `Authorization: Bearer <accessToken>`. Never in the URL.',
          },
        },
      },
    },
    // Shared schemas are named after their $id (ErrorEnvelope), not `def-0`.
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json['$id'] === 'string' ? json['$id'] : `def-${i}`) },
    transformObject: (documentObject) =>
      decorateOpenApi((documentObject as { openapiObject: Document }).openapiObject) as ReturnType<
        NonNullable<FastifyDynamicSwaggerOptions['transformObject']>
      >,
  };
}
