import type { Credential } from '../config/credentials-file.js';
import { errors } from '../foundation/errors.js';
import { containsCardNumber } from '../foundation/card-number-detector.js';
import type { RequestContext } from '../observability/outcomes.js';
import { cardPermissions } from './card-access.js';
import type { CardRecord, CardStatusChange } from './card-lifecycle-schemas.js';
import { cardRecordAnswer, counted, isWellFormedCardId, ownRecord, requirePermissions, timedCall } from './card-lookup.js';
import type { CardPorts } from './card-ports.js';

export interface ChangeCardStatusInput extends RequestContext {
  credential: Credential;
  cardId: string;
  change: CardStatusChange;
}

/** The problem a reason holding a card number is refused with (D58). */
export const REASON_LOOKS_LIKE_A_CARD = Object.freeze({ path: 'reason', message: 'looks like a card number' });

export type ChangeCardStatus = (input: ChangeCardStatusInput) => Promise<CardRecord>;

/**
 * Changing a card's status (D45): `cards:update`. The card is read first (an unknown, foreign
 * or malformed id is the read's 404), which gives the status it changes from:
 * - the status asked for is the card's already: 200 with the card, nothing sent, nothing
 *   audited (a retry is always safe, a repeated cancel included);
 * - the card is canceled: 409 card_canceled, final;
 * - otherwise the change goes to the connector, whose answer decides (it may have changed in
 *   between: its 404 and 409 are answered as such), and is audited as `card.status_changed`
 *   with from, to, the reason (card numbers masked), the credential and the correlation id.
 */
export function cardStatusChanging(ports: CardPorts): ChangeCardStatus {
  const { connector, outcomes } = ports;

  return async function changeCardStatus(input) {
    const { credential, cardId, change } = input;
    requirePermissions(credential, cardPermissions('update', false));
    // D58: free text never carries a card number; refused rather than kept masked.
    if (change.reason !== undefined && containsCardNumber(change.reason)) throw errors.validation([REASON_LOOKS_LIKE_A_CARD]);
    const account = credential.issuingAccount;
    const meta = { correlationId: input.correlationId };
    return counted(outcomes, 'status_change', input, async () => {
      if (!isWellFormedCardId(cardId)) throw errors.cardNotFound();
      const answered = await timedCall(outcomes, 'get', () => connector.getCard(account, cardId, meta));
      const current = answered && ownRecord(outcomes, answered, account, 'get', input);
      if (!current) throw errors.cardNotFound();
      if (current.status === change.status) {
        outcomes.record({ name: 'card.operation', operation: 'status_change', result: 'unchanged' }, input);
        return cardRecordAnswer(current);
      }
      if (current.status === 'canceled') throw errors.cardCanceled();

      const result = await timedCall(outcomes, 'status', () =>
        connector.setCardStatus(
          cardId,
          { issuingAccount: account, status: change.status, ...(change.reason !== undefined && { reason: change.reason }) },
          meta,
        ),
      );
      if (result.outcome === 'card_canceled') throw errors.cardCanceled();
      const updated = result.outcome === 'updated' ? ownRecord(outcomes, result.card, account, 'status', input) : undefined;
      if (!updated) throw errors.cardNotFound();
      outcomes.record(
        {
          name: 'card.status_changed',
          credential: credential.id,
          cardId: updated.cardId,
          from: current.status,
          to: updated.status,
          reason: change.reason,
        },
        input,
      );
      return cardRecordAnswer(updated);
    });
  };
}
