import type { Credential } from '../config/credentials-file.js';
import { containsCardNumber } from '../foundation/card-number-detector.js';
import { errors } from '../foundation/errors.js';
import type { RequestContext } from '../observability/outcomes.js';
import { cardPermissions, missingPermission } from './card-access.js';
import type { CardStatusAnswer, CardStatusChange } from './card-lifecycle-schemas.js';
import { cardRecordAnswer, counted, isWellFormedCardId, ownRecord, requirePermissions, timedCall } from './card-lookup.js';
import type { CardPorts } from './card-ports.js';

export interface ChangeCardStatusInput extends RequestContext {
  credential: Credential;
  cardId: string;
  change: CardStatusChange;
}

/** The problem a reason holding a card number is refused with (D58). */
export const REASON_LOOKS_LIKE_A_CARD = Object.freeze({ path: 'reason', message: 'looks like a card number' });

export type ChangeCardStatus = (input: ChangeCardStatusInput) => Promise<CardStatusAnswer>;

/**
 * Changing a card's status (D45): `cards:update`. One connector call per request (D57), which
 * changes the status and answers what it was before, atomically: nothing is read first, so two
 * concurrent changes on two replicas are told apart by the connector, not by reads that both saw
 * the old status.
 * - a reason holding a card number is refused (400, D58) before anything is asked;
 * - an unknown, foreign or malformed id is 404 card_not_found (a malformed one without a call);
 * - a canceled card answers 409 card_canceled for any other status, final;
 * - otherwise the connector's answer is audited: `card.status_changed` with from, to and
 *   `changed: true`, or `card.status_change_requested` with `changed: false` when the card already
 *   had that status (a retry, or the loser of a race), both with the reason, the credential and
 *   the correlation id.
 * The answer shows the whole masked card only to a credential that may read it (`cards:read`);
 * to one with `cards:update` alone, the id and the statuses (D56, D47).
 */
export function cardStatusChanging(ports: CardPorts): ChangeCardStatus {
  const { connector, outcomes, events } = ports;
  const awaitEvents = ports.settings.store.kind === 'redis' && ports.settings.store.replicasToAck > 0;
  const readNeeds = cardPermissions('read', false);

  return async function changeCardStatus(input) {
    const { credential, cardId, change } = input;
    requirePermissions(credential, cardPermissions('update', false));
    // D58: free text never carries a card number; refused rather than kept masked.
    if (change.reason !== undefined && containsCardNumber(change.reason)) throw errors.validation([REASON_LOOKS_LIKE_A_CARD]);
    const account = credential.issuingAccount;
    return counted(outcomes, 'status_change', input, async () => {
      if (!isWellFormedCardId(cardId)) throw errors.cardNotFound();
      const result = await timedCall(outcomes, 'status', () =>
        connector.setCardStatus(
          cardId,
          { issuingAccount: account, status: change.status, ...(change.reason !== undefined && { reason: change.reason }) },
          { correlationId: input.correlationId },
        ),
      );
      if (result.outcome === 'card_canceled') throw errors.cardCanceled();
      const card = result.outcome === 'updated' ? ownRecord(outcomes, result.card, account, 'status', input) : undefined;
      if (!card || result.outcome !== 'updated') throw errors.cardNotFound();
      const { previousStatus, changed } = result;
      outcomes.record(
        { name: 'card.status_change', credential: credential.id, cardId: card.cardId, from: previousStatus, to: card.status, changed, reason: change.reason },
        input,
      );
      if (changed) {
        const announced = events.statusChanged(account, { card: cardRecordAnswer(card), previousStatus, reason: change.reason, credentialId: credential.id });
        // With replicasToAck the operator asked for writes on replicas before the answer (D35, D66).
        if (awaitEvents) await announced;
      }
      if (missingPermission(credential, readNeeds)) return { cardId: card.cardId, status: card.status, previousStatus };
      return { ...cardRecordAnswer(card), previousStatus };
    });
  };
}
