import type { Credential } from '../config/credentials-file.js';
import { connectorIdempotencyKey, type ConnectorCardRecord } from '../connector/connector-contract.js';
import { errors } from '../foundation/errors.js';
import type { RequestContext } from '../observability/outcomes.js';
import { UNKNOWN_CREATOR } from '../store/store-types.js';
import { cardPermissions, mayReveal, NOT_CREATOR } from './card-access.js';
import { canonicalRequestId } from './card-idempotency.js';
import type { CardRecord } from './card-lifecycle-schemas.js';
import { cardRecordAnswer, counted, isWellFormedCardId, ownRecord, requirePermissions, timedCall } from './card-lookup.js';
import type { CardPorts } from './card-ports.js';

export interface ReadCardInput extends RequestContext {
  credential: Credential;
  cardId: string;
  reveal: boolean;
}

export type ReadCard = (input: ReadCardInput) => Promise<CardRecord>;

/**
 * Reading one card (D43): `cards:read`; the card as the connector has it now, masked; with
 * `revealDetails=true` the full PAN and CVC under the reveal rule of creation (card-access.ts
 * mayReveal: `cards:reveal` and the creating credential), audited like creation's reveal.
 *
 * Another account's card, an unknown id and a malformed id are the same 404: the first two
 * both ask the connector (which answers 404 for both), so neither the answer nor the work
 * tells them apart.
 *
 * Who created the card is what creation's idempotency record remembers, and only for its
 * window (`cards.idempotencyTtlSeconds`, 24 h by default). After it, nobody can be shown to be
 * the creator and the card reveals to nobody, as a card whose creator the gateway never knew
 * (D31). The gateway keeps no card data longer than that on purpose (docs/decisions.md).
 */
export function cardReading(ports: CardPorts): ReadCard {
  const { connector, outcomes, store, clock, pendingRecords } = ports;

  /**
   * The creating credential, from creation's record if it is still kept and is this card's.
   * A card is answered before its record is stored: a record still on its way from this
   * process is read from memory, so the creator's reveal right after creation is not refused.
   */
  async function creatorOf(record: ConnectorCardRecord): Promise<string> {
    const key = connectorIdempotencyKey(record.issuingAccount, canonicalRequestId(record.requestId));
    const pending = pendingRecords.recordOf(key);
    if (pending?.card.cardId === record.cardId) return pending.creator;
    const seen = await store.idempotency.peek(key, clock.now());
    return seen.state === 'completed' && seen.record.card.cardId === record.cardId ? seen.record.creator : UNKNOWN_CREATOR;
  }

  return async function readCard(input) {
    const { credential, cardId, reveal } = input;
    requirePermissions(credential, cardPermissions('read', reveal));
    return counted(outcomes, 'read', input, async () => {
      if (!isWellFormedCardId(cardId)) throw errors.cardNotFound();
      const answered = await timedCall(outcomes, 'get', () => connector.getCard(credential.issuingAccount, cardId, { correlationId: input.correlationId }));
      const record = answered && ownRecord(outcomes, answered, credential.issuingAccount, 'get', input);
      if (!record) throw errors.cardNotFound();

      let answer: CardRecord;
      if (reveal) {
        const ids = { credential: credential.id, requestId: canonicalRequestId(record.requestId), cardId: record.cardId };
        if (!mayReveal(credential, await creatorOf(record))) {
          outcomes.record({ name: 'access.denied', reason: 'reveal_not_creator', ...ids }, input);
          throw errors.permissionDenied(NOT_CREATOR);
        }
        answer = cardRecordAnswer(record, { pan: record.pan, cvc: record.cvc });
        outcomes.record({ name: 'card.revealed', ...ids }, input);
      } else {
        answer = cardRecordAnswer(record);
      }
      outcomes.record({ name: 'card.operation', operation: 'read', result: 'ok' }, input);
      return answer;
    });
  };
}
