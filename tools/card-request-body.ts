import type { CardRequest } from '../src/cards/card-schemas.js';

/**
 * The card request a traveller's virtual card is made with: every optional member of spec 2.3
 * within the D14 bounds, about the size of a real partner's request (≈430 bytes as JSON). The
 * benchmark's load and the tests' full body are this one, so what is measured is what is tested.
 */

/** POST /api/v1/issuing/cards's body for `requestId` and `cardLimit` (minor units of EUR); new objects each call. */
export function cardRequestBody(requestId: string, cardLimit: number): CardRequest & Required<Pick<CardRequest, 'config' | 'metadata'>> {
  return {
    requestId,
    cardLimit,
    currency: 'EUR',
    config: {
      expiryDuration: 12,
      authorizationWindow: { startDate: '2026-12-01T00:00:00Z', endDate: '2026-12-31T23:59:59Z' },
      tolerance: { percentage: 5 },
      cardType: 'VIRTUAL_TRAVEL',
      maxTransactions: 3,
      allowedCategories: ['airline', 'hotel'],
    },
    metadata: { card_name: 'Trip to Lisbon', file_ref: 'PNR-7XK2Q9', cost_center: 'CC-4410', airline_code: 'TP' },
  };
}
