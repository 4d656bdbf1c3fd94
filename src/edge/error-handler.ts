import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Clock } from '../clock.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import { fieldPath } from '../config/config-error.js';
import { maskPan } from '../cards/mask-card.js';
import { StoreUnavailableError } from '../store/store-types.js';
import { errors, GatewayError, toEnvelope, type FieldProblem } from './errors.js';

interface AjvLikeError {
  instancePath?: string;
  keyword?: string;
  message?: string;
  params?: Record<string, unknown>;
}

const CARD_NUMBER_LIKE = /\d{13,}/g;

/** Ajv errors as `{ path, message }` a developer can act on: `config.tolerance.percentage`. */
export function validationFields(validation: readonly AjvLikeError[], context: string | undefined): FieldProblem[] {
  const prefix = context === 'querystring' ? 'query' : context === 'headers' ? 'headers' : '';
  const seen = new Set<string>();
  const fields: FieldProblem[] = [];
  for (const error of validation) {
    let pointer = error.instancePath ?? '';
    let message = error.message ?? 'is invalid';
    if (error.keyword === 'additionalProperties') {
      pointer = `${pointer}/${String(error.params?.['additionalProperty'])}`;
      message = 'is not a known field';
    } else if (error.keyword === 'required') {
      pointer = `${pointer}/${String(error.params?.['missingProperty'])}`;
      message = 'is required';
    } else if (error.keyword === 'enum') {
      message = `must be one of ${JSON.stringify(error.params?.['allowedValues'])}`;
    } else if (error.keyword === 'propertyNames') {
      message = 'has a key that is too long or invalid';
    }
    // A key is the client's text: a card number used as one is masked like a PAN (D18).
    let path = pointer === '' ? '(body)' : fieldPath(pointer).replace(CARD_NUMBER_LIKE, maskPan);
    if (prefix) path = pointer === '' ? prefix : `${prefix}.${path}`;
    const key = `${path}\u0000${message}`;
    if (!seen.has(key)) {
      seen.add(key);
      fields.push({ path, message });
    }
  }
  return fields;
}

/** Maps anything thrown on a request to a public GatewayError; library errors by their `code`. */
export function toGatewayError(error: unknown): GatewayError {
  if (error instanceof GatewayError) return error;
  if (error instanceof StoreUnavailableError) return errors.storeUnavailable(error);
  const fastifyError = error as Partial<FastifyError> & { validation?: AjvLikeError[]; validationContext?: string };
  if (Array.isArray(fastifyError.validation)) return errors.validation(validationFields(fastifyError.validation, fastifyError.validationContext));
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return errors.bodyTooLarge();
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_TYPE':
      return errors.unsupportedMediaType();
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return errors.emptyBody();
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return errors.malformedJson();
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return errors.badRequest('Content-Length does not match the body');
    default:
      break;
  }
  // Every JSON failure, prototype keys included, arrives as FST_ERR_CTP_INVALID_JSON_BODY above.
  if (fastifyError.statusCode === 400) return errors.badRequest('Bad request');
  if (fastifyError.statusCode === 404) return errors.notFound();
  if (fastifyError.statusCode === 413) return errors.bodyTooLarge();
  if (fastifyError.statusCode === 415) return errors.unsupportedMediaType();
  return errors.internal(error);
}

export function sendError(reply: FastifyReply, error: GatewayError, clock: Clock): FastifyReply {
  reply.code(error.status);
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
    if (mapped.code === 'STORE_UNAVAILABLE') metrics.storeUnavailable.inc();
    if (mapped.status >= 500) {
      const cause = mapped === error ? mapped.cause : error;
      request.log.error({ err: cause instanceof Error ? { type: cause.name, message: cause.message, code: (cause as { code?: unknown }).code, stack: cause.stack } : undefined, code: mapped.code }, 'request failed');
    }
    return sendError(reply, mapped, clock);
  });
}
