/**
 * An answer of the gateway, and what an answer that is not a success becomes: the typed error
 * callers branch on (the envelope's code, retryable or not, Retry-After).
 */
import { GATEWAY_RETRY_ADVICE } from './error-codes.js';
import { ApiError, CardGatewayError, RETRYABLE_STATUSES } from './errors.js';
import { retryAfterSeconds } from './retry.js';
import type { Operation } from './scope.js';
import { isRecord } from './shapes.js';
import type { HttpResponseLike } from './transport.js';

export interface Answer {
  status: number;
  headers: HttpResponseLike['headers'];
  /** The parsed body; undefined when empty or not JSON. */
  json: unknown;
  correlationId: string | undefined;
}

/** Which attempt of which operation an error belongs to. */
export interface AttemptLabel {
  operation: Operation;
  attempt: number;
  requestId?: string | undefined;
}

/**
 * A code the gateway's catalogue calls final although its status is retryable: 409
 * `card_canceled` says the card is canceled for good, unlike 409 `idempotency_in_progress`.
 */
const finalCode = (code: string): boolean =>
  Object.hasOwn(GATEWAY_RETRY_ADVICE, code) && GATEWAY_RETRY_ADVICE[code as keyof typeof GATEWAY_RETRY_ADVICE] === 'no';

/** Whether the client repeats a request answered `status` with the envelope's `code`. */
export const retryableAnswer = (status: number, code: string): boolean => RETRYABLE_STATUSES.has(status) && !finalCode(code);

/** The gateway's envelope as an ApiError; anything else answering an error status as `unexpected_response`. */
export function apiError(answer: Answer, label: AttemptLabel, nowMs: number): ApiError {
  const envelope = answer.json;
  const retryable = RETRYABLE_STATUSES.has(answer.status);
  const base = { status: answer.status, retryable, requestId: label.requestId, attempts: label.attempt };
  if (isRecord(envelope) && typeof envelope.code === 'string' && typeof envelope.message === 'string') {
    return new ApiError(envelope.message, {
      ...base,
      retryable: retryableAnswer(answer.status, envelope.code),
      code: envelope.code,
      correlationId: typeof envelope.correlationId === 'string' ? envelope.correlationId : answer.correlationId,
      retryAfter: retryAfterSeconds(answer.headers.get('retry-after'), envelope.retryAfter, nowMs),
      details: isRecord(envelope.details) ? envelope.details : {},
    });
  }
  return new ApiError(`${label.operation}: unexpected ${answer.status} answer without the gateway's error envelope`, {
    ...base,
    code: 'unexpected_response',
    correlationId: answer.correlationId,
    retryAfter: retryAfterSeconds(answer.headers.get('retry-after'), undefined, nowMs),
  });
}

/** A success status whose body is not what the route promises. */
export function invalidResponse(answer: Answer, label: AttemptLabel, retryable: boolean): CardGatewayError {
  return new CardGatewayError(`${label.operation}: the ${answer.status} answer does not have the documented shape`, {
    code: 'invalid_response',
    status: answer.status,
    correlationId: answer.correlationId,
    retryable,
    requestId: label.requestId,
    attempts: label.attempt,
  });
}
