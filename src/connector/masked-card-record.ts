import type { EventCard } from '../foundation/event-types.js';
import { maskCvc, maskPan } from '../foundation/masking.js';
import type { ConnectorCardRecord } from './connector-contract.js';

/** A masked card record: always with its requestId and metadata ({} when it had none). */
export type MaskedCardRecord = EventCard & { readonly requestId: string; readonly metadata: Readonly<Record<string, string>> };

/**
 * The card record a client without `revealDetails` reads, PAN and CVC masked as D18 masks them:
 * the lifecycle answers (card-lookup.ts `cardRecordAnswer`) and the card an event carries (D63)
 * are this one shape, so an event's card and a read of the card compare member by member.
 */
export function maskedCardRecord(record: ConnectorCardRecord): MaskedCardRecord {
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
    metadata: record.metadata ?? {},
  };
}
