import type { EventCard } from '../foundation/event-types.js';
import { maskPan } from '../foundation/masking.js';
import type { ConnectorCardRecord } from './connector-contract.js';

/**
 * The card an event carries (D63): the record a client without `revealDetails` reads, with the
 * PAN masked as D18 masks it and no CVC at all (a masked CVC tells a receiver nothing). The same
 * members, in the same order, as the lifecycle answers (card-lookup.ts `cardRecordAnswer`), the
 * PAN under `maskedPan`, so that no event holds a member named `pan` or `cvc`.
 */
export function eventCard(record: ConnectorCardRecord): EventCard {
  return {
    cardId: record.cardId,
    maskedPan: maskPan(record.pan),
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
