import { ConnectorError } from '../connector/connector-port.js';
import { errors, GatewayError } from '../foundation/errors.js';
import type { Outcomes, RequestContext } from '../observability/outcomes.js';

/**
 * Card errors, mapped once. A connector call rejects with a ConnectorError (the port's one
 * failure); it travels as it is through the idempotency (a duplicate waiting on the same
 * forward gets the same one) to the use case, which answers and records it here.
 */

/** D19: a connector failure as the client is answered: 504 for a timeout, 502 otherwise; the ConnectorError stays the cause. */
export function connectorAnswer(failure: ConnectorError): GatewayError {
  if (failure.kind === 'timeout') return errors.connectorTimeout(failure);
  if (failure.kind === 'invalid_answer') return errors.connectorInvalidAnswer(failure);
  return errors.connectorUnavailable(failure);
}

/**
 * A card creation that failed: records what it came to (`card.failed`, audited with the
 * connector failure's kind; `card.in_progress`, counted, for a 409) and returns the error to
 * answer. The connector call itself was counted once, when it failed (card-forwarding.ts).
 */
export function creationFailed(outcomes: Outcomes, error: unknown, ids: { credential: string; requestId: string }, context: RequestContext): unknown {
  if (error instanceof ConnectorError) {
    outcomes.record({ name: 'card.failed', ...ids, reason: error.kind }, context);
    return connectorAnswer(error);
  }
  if (error instanceof GatewayError && error.code === 'idempotency_in_progress') outcomes.record({ name: 'card.in_progress' }, context);
  return error;
}
