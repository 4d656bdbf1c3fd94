import { randomUUID } from 'node:crypto';
import type { TransactionEventType } from '../../src/foundation/event-types.js';

/** A PAN and CVC that must never appear past the listener. */
export const FULL_PAN = '4111111111111111';
export const FULL_CVC = '737';

/** The card record as the connector's `GET /v1/cards/{cardId}` answers it: PAN and CVC in full. */
export function connectorRecord(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    cardId: 'card_0123456789abcdef',
    pan: FULL_PAN,
    cvc: FULL_CVC,
    expMonth: 11,
    expYear: 2029,
    status: 'inactive',
    cardLimit: 10_500,
    currency: 'EUR',
    createdAt: '2026-11-01T10:00:00.000Z',
    issuingAccount: 'acct-eu',
    requestId: '0b8e2d3c-5f4a-4c1e-9a7b-2f6d8e1c3a5b',
    requestedCardLimit: 10_000,
    metadata: { trip: 'Lisbon' },
    ...overrides,
  };
}

export const eventId = (): string => `evt-${randomUUID()}`;

/** A valid `card.status_changed` body: the processor froze the card. */
export function statusChangedBody(data: Record<string, unknown> = {}, envelope: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    eventId: eventId(),
    type: 'card.status_changed',
    occurredAt: '2026-11-29T09:00:00.123Z',
    issuingAccount: 'acct-eu',
    data: { card: connectorRecord(), previousStatus: 'active', status: 'inactive', reason: 'suspected fraud', ...data },
    ...envelope,
  };
}

/** A valid transaction body of `type` (a decline with its reason). */
export function transactionBody(
  type: TransactionEventType = 'transaction.authorized',
  data: Record<string, unknown> = {},
  envelope: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    eventId: eventId(),
    type,
    occurredAt: '2026-11-29T09:00:00Z',
    issuingAccount: 'acct-eu',
    data: {
      transactionId: 'txn_42',
      cardId: 'card_0123456789abcdef',
      amount: 1250,
      currency: 'EUR',
      merchant: { name: 'Café Lisboa', categoryCode: '5814', country: 'PT' },
      ...(type === 'transaction.declined' && { declineReason: 'insufficient_funds' }),
      ...data,
    },
    ...envelope,
  };
}
