import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Clock } from '../foundation/clock.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import { fieldPath } from '../config/config-error.js';
import { maskCardNumbers } from '../foundation/card-number-detector.js';
import { StoreUnavailableError } from '../store/store-types.js';
import { bearerChallenge, errors, GatewayError, MAX_LISTED_FIELDS, toEnvelope, type FieldProblem } from '../foundation/errors.js';
import { StrictJsonError } from './strict-json.js';

export interface AjvLikeError {
  instancePath?: string;
  keyword?: string;
  message?: string;
  params?: Record<string, unknown>;
}

/** Characters of a field path an error shows: a member name is the client's text, and an error body never grows with the request (D29). */
export const MAX_SHOWN_PATH = 256;

/** A path as error details show it: a card number used as a member name masked like a PAN (D18, D58), a long one cut. */
function shownPath(path: string): string {
  const masked = maskCardNumbers(path);
  return masked.length > MAX_SHOWN_PATH ? `${masked.slice(0, MAX_SHOWN_PATH)}…` : masked;
}

/**
 * Ajv errors as `{ path, message }` a developer can act on (`config.tolerance.percentage`), and
 * how many more there were. At most MAX_LISTED_FIELDS + 1 problems are built, whatever the number
 * of errors: the answer lists 20 and counts the rest (D29), and building a path for every error
 * of a large body is what made its refusal cost several times its reading (issue 31).
 */
export function validationProblems(validation: readonly AjvLikeError[], context: string | undefined): { fields: FieldProblem[]; omitted: number } {
  const prefix = context === 'querystring' ? 'query' : context === 'headers' ? 'headers' : '';
  const seen = new Set<string>();
  const fields: FieldProblem[] = [];
  let read = 0;
  for (const error of validation) {
    if (fields.length > MAX_LISTED_FIELDS) break;
    read += 1;
    let pointer = error.instancePath ?? '';
    let message = error.message ?? 'is invalid';
    if (error.keyword === 'additionalProperties') {
      pointer = `${pointer}/${String(error.params?.['additionalProperty'])}`;
      message = context === 'querystring' ? 'is not a known parameter' : 'is not a known field';
    } else if (error.keyword === 'required') {
      pointer = `${pointer}/${String(error.params?.['missingProperty'])}`;
      message = 'is required';
    } else if (error.keyword === 'enum') {
      message = `must be one of ${JSON.stringify(error.params?.['allowedValues'])}`;
    } else if (error.keyword === 'propertyNames') {
      message = 'has a key that is too long or invalid';
    }
    let path = pointer === '' ? '(body)' : shownPath(fieldPath(pointer));
    if (prefix) path = pointer === '' ? prefix : `${prefix}.${path}`;
    const key = `${path}\u0000${message}`;
    if (!seen.has(key)) {
      seen.add(key);
      fields.push({ path, message });
    }
  }
  // The errors not read are counted as they are: past the listed ones, an exact count of
  // distinct problems would cost what the cap saves.
  return { fields, omitted: validation.length - read };
}

/** A problem the strict reader found, shown like validation's (D18, D58, D29). */
const maskField = (field: FieldProblem): FieldProblem => ({ path: shownPath(field.path), message: field.message });

/** Maps anything thrown on a request to a public GatewayError; library errors by their `code`. */
export function toGatewayError(error: unknown): GatewayError {
  if (error instanceof GatewayError) return error;
  if (error instanceof StoreUnavailableError) return errors.storeUnavailable(error);
  if (error instanceof StrictJsonError) return errors.validation(error.fields.map(maskField), error.omitted);
  const fastifyError = error as Partial<FastifyError> & { validation?: AjvLikeError[]; validationContext?: string };
  if (Array.isArray(fastifyError.validation)) {
    const { fields, omitted } = validationProblems(fastifyError.validation, fastifyError.validationContext);
    return errors.validation(fields, omitted);
  }
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return errors.bodyTooLarge();
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return errors.unsupportedMediaType();
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return errors.malformedRequest('Content-Length does not match the body');
    default:
      break;
  }
  // JSON bodies never fail here: the strict parser (strict-json-parser.ts) answers them with
  // catalogue errors of its own.
  if (fastifyError.statusCode === 400) return errors.malformedRequest('Bad request');
  if (fastifyError.statusCode === 404) return errors.notFound();
  if (fastifyError.statusCode === 413) return errors.bodyTooLarge();
  if (fastifyError.statusCode === 415) return errors.unsupportedMediaType();
  return errors.internal(error);
}

/**
 * Writes the envelope with the error's status and headers: `Retry-After` when it has one, and on
 * every 401 the `WWW-Authenticate: Bearer` challenge its code calls for (RFC 6750, D36).
 */
export function sendError(reply: FastifyReply, error: GatewayError, clock: Clock): FastifyReply {
  reply.code(error.status);
  if (error.status === 401) {
    const challenge = bearerChallenge(error.code);
    if (challenge !== undefined) reply.header('www-authenticate', challenge);
  }
  for (const [name, value] of Object.entries(error.headers)) reply.header(name, value);
  if (error.retryAfter !== undefined) reply.header('retry-after', String(error.retryAfter));
  return reply.type('application/json; charset=utf-8').send(toEnvelope(error, reply.request.id, clock.now()));
}

/**
 * Every error becomes the D20 envelope. Messages are public only below 500; a 5xx says
 * "Internal error" (or its catalogue text) and the detail goes to the log, never to the client.
 */
export function installErrorHandler(app: FastifyInstance, clock: Clock, metrics: GatewayMetrics): void {
  app.setErrorHandler((error: unknown, request: FastifyRequest, reply: FastifyReply) => {
    const mapped = toGatewayError(error);
    // Store outages are counted, not logged per request: one line per change of the store's
    // state comes from the store monitor. Upstream failures are logged where they happen.
    if (mapped.code === 'store_unavailable') metrics.storeUnavailable.inc();
    if (mapped.code === 'internal_error' || mapped.code === 'record_unreadable') {
      const cause = mapped === error ? mapped.cause : error;
      request.log.error(
        {
          correlationId: request.id,
          err: cause instanceof Error ? { type: cause.name, message: cause.message, code: (cause as { code?: unknown }).code, stack: cause.stack } : undefined,
          code: mapped.code,
        },
        'request failed',
      );
    }
    // Fastify closes the connection after any body parser error, in case the client is still
    // sending. The strict JSON parser only runs on a body read to its end (parseAs: 'string'), so
    // its refusals leave nothing unread: the connection stays usable, as for any other 400.
    if (fromStrictJsonParser(error, mapped)) reply.removeHeader('connection');
    return sendError(reply, mapped, clock);
  });
}

/** A refusal of strict-json-parser.ts: empty, not JSON, or not strict JSON (D29). */
const fromStrictJsonParser = (error: unknown, mapped: GatewayError): boolean =>
  error instanceof StrictJsonError || mapped.code === 'malformed_json' || mapped.code === 'empty_body';
