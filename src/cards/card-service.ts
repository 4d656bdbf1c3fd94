import type { LiveSettings } from '../config/live-settings.js';
import type { Credential } from '../config/credentials-file.js';
import { errors } from '../foundation/errors.js';
import type { Outcomes, RequestContext } from '../observability/outcomes.js';
import { canonicalRequestId, connectorFailureOf, type CardIssuance } from './card-issuance.js';
import type { CardRequest, CardResponse } from './card-schemas.js';
import type { CardSealer } from './card-sealing.js';
import { checkCardRequest } from './validate-card-request.js';

export const NOT_CREATOR = 'Only the credential that created this card can reveal its details';

export interface CardResult {
  card: CardResponse;
  /** Answered from the idempotency record: `Idempotent-Replayed: true` (D16). */
  replayed: boolean;
  /** The request's payload differs from the one that made the card: `Idempotency-Payload-Mismatch: true`. */
  payloadMismatch: boolean;
}

/**
 * Card creation as a use case (spec 4.4, D13-D18, D28, D31): validate what a schema cannot,
 * issue idempotently, and shape the answer, masked unless the creator asked to reveal.
 */
export class CardService {
  constructor(
    private readonly deps: {
      issuance: CardIssuance;
      live: LiveSettings;
      sealer: CardSealer;
      outcomes: Outcomes;
    },
  ) {}

  async create(input: { credential: Credential; body: CardRequest; reveal: boolean } & RequestContext): Promise<CardResult> {
    const { issuance, live, sealer, outcomes } = this.deps;
    const { credential, body, reveal } = input;
    // The route refuses this before the body is read (so nothing is created); the rule lives here.
    if (reveal && !credential.permissions.has('cards:reveal')) throw errors.permissionDenied('Permission cards:reveal is required for revealDetails=true');
    const { problems, effectiveLimit } = checkCardRequest(body, live.current.issuingAccounts.get(credential.issuingAccount));
    if (problems.length > 0) throw errors.validation(problems);

    // Audited in the store's and the connector's spelling, not the client's.
    const ids = { credential: credential.id, requestId: canonicalRequestId(body.requestId) };
    let issued;
    try {
      issued = await issuance.issue({
        issuingAccount: credential.issuingAccount,
        credentialId: credential.id,
        body,
        effectiveLimit,
        correlationId: input.correlationId,
      });
    } catch (error) {
      const failure = connectorFailureOf(error);
      if (failure) outcomes.record({ name: 'card.failed', ...ids, reason: failure }, input);
      if ((error as { code?: unknown }).code === 'idempotency_in_progress') outcomes.record({ name: 'card.in_progress' }, input);
      throw error;
    }
    const { card } = issued.record;
    const cardIds = { ...ids, cardId: card.cardId };
    if (issued.replayed) outcomes.record({ name: 'card.replayed', ...cardIds, payloadMismatch: issued.payloadMismatch }, input);
    else outcomes.record({ name: 'card.created', ...cardIds, connectorReplay: issued.connectorReplay }, input);

    let pan = card.maskedPan;
    let cvc = card.maskedCvc ?? '***';
    if (reveal) {
      // D28: a card's details belong to the credential that created it, even within one account.
      if ((issued.replayed || issued.connectorReplay) && issued.record.creator !== credential.id) {
        outcomes.record(
          { name: 'access.denied', credential: credential.id, reason: 'reveal_not_creator', requestId: ids.requestId, cardId: card.cardId },
          input,
        );
        throw errors.permissionDenied(NOT_CREATOR);
      }
      const secrets = issued.fresh ?? sealer.open(issued.record.sealedSecrets, issued.recordKey);
      pan = secrets.pan;
      cvc = secrets.cvc;
      outcomes.record({ name: 'card.revealed', ...cardIds }, input);
    }
    return {
      card: {
        cardId: card.cardId,
        pan,
        cvc,
        expMonth: card.expMonth,
        expYear: card.expYear,
        status: card.status,
        requestedCardLimit: card.requestedCardLimit,
        cardLimit: card.cardLimit,
        currency: card.currency,
        createdAt: card.createdAt,
      },
      replayed: issued.replayed,
      payloadMismatch: issued.payloadMismatch,
    };
  }
}
