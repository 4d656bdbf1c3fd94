import { ConnectorError, type ConnectorCardRequest, type ConnectorReply } from '../connector/connector-port.js';
import { UNKNOWN_CREATOR, type ClaimAttempt } from '../store/store-types.js';
import type { Outcomes } from '../observability/outcomes.js';
import type { CardPorts } from './card-ports.js';
import { maskCard } from './card-presentation.js';
import type { CardRequest } from './card-schemas.js';
import type { ClaimRequest, IssuedCard } from './card-idempotency.js';

/** A card creation as it is forwarded: the client's body, checked, and the gateway's own values. */
export interface CreationRequest extends ClaimRequest {
  readonly issuingAccount: string;
  /** Canonical (card-idempotency.ts). */
  readonly requestId: string;
  readonly body: CardRequest;
  /** The limit with the tolerance applied (D15): what the processor is asked for. */
  readonly effectiveLimit: number;
}

/** Counts a connector call that answered: once per call, with its duration (from `performance.now()` at `started`). */
export function connectorAnswered(outcomes: Outcomes, started: number): void {
  outcomes.connectorCalled('ok', (performance.now() - started) / 1000);
}

/**
 * Counts a connector call that failed, once per call (an outage must not become a log line per
 * request; each request it fails is audited by its use case), and returns the failure as the
 * port's ConnectorError: the port rejects with nothing else, anything else is kind `error`.
 */
export function connectorFailed(outcomes: Outcomes, error: unknown, started: number): ConnectorError {
  const failure = error instanceof ConnectorError ? error : new ConnectorError('error', { cause: error });
  outcomes.connectorCalled(failure.kind, (performance.now() - started) / 1000);
  return failure;
}

/**
 * Forwards a card creation whose key this process holds, through the connector port, and makes
 * the record the gateway keeps of the answer: masked, its secrets sealed (D18). A failure
 * rejects with the port's ConnectorError, which the idempotency answers by freeing the key and
 * the use case maps once (card-errors.ts).
 */
export async function forwardCreation(
  ports: Pick<CardPorts, 'connector' | 'outcomes' | 'sealer'>,
  request: CreationRequest,
  previous: ClaimAttempt | undefined,
): Promise<IssuedCard> {
  const { connector, outcomes, sealer } = ports;
  const { body, attempt, recordKey, context } = request;
  const payload: ConnectorCardRequest = {
    requestId: request.requestId,
    issuingAccount: request.issuingAccount,
    requestedCardLimit: body.cardLimit,
    cardLimit: request.effectiveLimit,
    currency: body.currency,
    config: body.config ?? {},
    metadata: body.metadata ?? {},
  };
  const started = performance.now();
  let reply: ConnectorReply;
  try {
    reply = await connector.createCard(payload, { idempotencyKey: recordKey, correlationId: context.correlationId });
  } catch (error) {
    throw connectorFailed(outcomes, error, started);
  }
  connectorAnswered(outcomes, started);

  const { card } = reply;
  // The connector's replay is the card of the first attempt (D31). When the gateway no longer
  // knows that attempt, this requester is not known to be the creator, so nobody may reveal
  // the card (D28); the masked answer still goes out.
  const first = reply.replayed ? (previous ?? { ...attempt, credentialId: UNKNOWN_CREATOR }) : attempt;
  const payloadMismatch =
    reply.replayed && (previous ? previous.fingerprint !== attempt.fingerprint : card.cardLimit !== request.effectiveLimit || card.currency !== body.currency);
  return {
    record: {
      fingerprint: first.fingerprint,
      creator: first.credentialId,
      card: maskCard(card, first.requestedCardLimit),
      sealedSecrets: sealer.seal({ pan: card.pan, cvc: card.cvc }, recordKey),
    },
    fresh: { pan: card.pan, cvc: card.cvc },
    replayed: false,
    connectorReplay: reply.replayed,
    payloadMismatch,
  };
}
