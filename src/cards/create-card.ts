import type { Credential } from '../config/credentials-file.js';
import { connectorIdempotencyKey } from '../connector/connector-contract.js';
import { errors } from '../foundation/errors.js';
import type { RequestContext } from '../observability/outcomes.js';
import { cardPermissions, mayReveal, missingPermission, NOT_CREATOR } from './card-access.js';
import { creationFailed } from './card-errors.js';
import { forwardCreation, type CreationRequest } from './card-forwarding.js';
import { canonicalRequestId, CardClaims, type IssuedCard } from './card-idempotency.js';
import type { CardPorts } from './card-ports.js';
import { cardAnswer } from './card-presentation.js';
import type { CardRequest, CardResponse } from './card-schemas.js';
import type { CardSecrets } from './card-sealing.js';
import { requestFingerprint } from './request-fingerprint.js';
import { checkCardRequest } from './validate-card-request.js';

export interface CreateCardInput extends RequestContext {
  credential: Credential;
  body: CardRequest;
  reveal: boolean;
}

export interface CardResult {
  card: CardResponse;
  /** Answered from the idempotency record: `Idempotent-Replayed: true` (D16). */
  replayed: boolean;
  /** The request's payload differs from the one that made the card: `Idempotency-Payload-Mismatch: true`. */
  payloadMismatch: boolean;
}

export type CreateCard = (input: CreateCardInput) => Promise<CardResult>;

/**
 * Card creation as a use case (spec 4.4, D13-D18, D28, D31), built once on the card ports:
 * check what a schema cannot, issue idempotently (card-idempotency.ts, forwarding through
 * card-forwarding.ts), record what it came to, and answer the card, masked unless its creator
 * asked to reveal it.
 */
export function cardCreation(ports: CardPorts): CreateCard {
  const { live, sealer, outcomes } = ports;
  const claims = new CardClaims<CreationRequest>(
    ports,
    (request, previous) => forwardCreation(ports, request, previous),
    (request, issued) =>
      ports.events.created(request.issuingAccount, {
        ...cardAnswer(issued.record.card, undefined),
        requestId: request.requestId,
        metadata: request.body.metadata ?? {},
      }),
  );

  return async function createCard(input) {
    const { credential, body, reveal } = input;
    // The route refuses this before the body is read (so nothing is created), from the same list.
    const missing = missingPermission(credential, cardPermissions('create', reveal));
    if (missing) throw errors.permissionDenied(missing.refusal);
    const { problems, effectiveLimit } = checkCardRequest(body, live.current.issuingAccounts.get(credential.issuingAccount));
    if (problems.length > 0) throw errors.validation(problems);

    // Audited in the store's and the connector's spelling, not the client's.
    const requestId = canonicalRequestId(body.requestId);
    const ids = { credential: credential.id, requestId };
    const request: CreationRequest = {
      recordKey: connectorIdempotencyKey(credential.issuingAccount, requestId),
      attempt: { fingerprint: requestFingerprint({ ...body, requestId }), requestedCardLimit: body.cardLimit, credentialId: credential.id },
      context: input,
      issuingAccount: credential.issuingAccount,
      requestId,
      body,
      effectiveLimit,
    };
    let issued: IssuedCard;
    try {
      issued = await claims.resolve(request);
    } catch (error) {
      throw creationFailed(outcomes, error, ids, input);
    }
    const { record } = issued;
    const cardIds = { ...ids, cardId: record.card.cardId };
    if (issued.replayed) outcomes.record({ name: 'card.replayed', ...cardIds, payloadMismatch: issued.payloadMismatch }, input);
    else outcomes.record({ name: 'card.created', ...cardIds, connectorReplay: issued.connectorReplay }, input);

    let revealed: CardSecrets | undefined;
    if (reveal) {
      // cards:reveal was checked above: a refusal here is D28's (another credential's card).
      if (!mayReveal(credential, record.creator)) {
        outcomes.record({ name: 'access.denied', credential: credential.id, reason: 'reveal_not_creator', requestId, cardId: record.card.cardId }, input);
        throw errors.permissionDenied(NOT_CREATOR);
      }
      revealed = issued.fresh ?? sealer.open(record.sealedSecrets, request.recordKey);
      outcomes.record({ name: 'card.revealed', ...cardIds }, input);
    }
    return { card: cardAnswer(record.card, revealed), replayed: issued.replayed, payloadMismatch: issued.payloadMismatch };
  };
}
