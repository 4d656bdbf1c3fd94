import type { EventCard } from '../foundation/event-types.js';
import { maskCvc, maskPan } from '../foundation/masking.js';
import type { ConnectorCardRecord } from './connector-contract.js';

/**
 * The card an event carries (D63): the record a client without `revealDetails` reads, PAN and CVC
 * masked as D18 masks them. The same members, in the same order, as the lifecycle answers
 * (card-lookup.ts `cardRecordAnswer`), so an event's card and a read of the card compare member
 * by member.
 */
export function eventCard(record: ConnectorCardRecord): EventCard {
  return {
    cardId: record.cardId,
    pan: maskPan(record.pan),
    cvc: maskCvc(record.cvc),
    expMonth: record.expMonth,
    expYear: record.expYear,
    status: record.status,
    requestedCardLimit: record.requestedCardLimit,
    cardLimit: record.cardLimit,
    currency: record.currency,
    createdAt: record.createdAt,
    requestId: record.requestId,
    metadata: { ...record.metadata },
  };
}
