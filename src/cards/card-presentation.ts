import type { ConnectorCard } from '../connector/connector-port.js';
import { maskCvc, maskPan } from '../foundation/masking.js';
import type { StoredCard } from '../store/store-types.js';
import type { CardResponse } from './card-schemas.js';
import type { CardSecrets } from './card-sealing.js';

/** A card as the gateway keeps and shows it unless revealed: PAN and CVC masked (D18). */
export type MaskedCard = StoredCard['card'];

/** The masked card of a connector's answer; `requestedCardLimit` is the first attempt's (D31). */
export function maskCard(card: ConnectorCard, requestedCardLimit: number): MaskedCard {
  return {
    cardId: card.cardId,
    maskedPan: maskPan(card.pan),
    maskedCvc: maskCvc(card.cvc),
    expMonth: card.expMonth,
    expYear: card.expYear,
    status: card.status,
    requestedCardLimit,
    cardLimit: card.cardLimit,
    currency: card.currency,
    createdAt: card.createdAt,
  };
}

/**
 * The card record of an answer (spec 2.2): masked, or with the PAN and CVC when the caller may
 * reveal them (card-access.ts decides; this only shapes).
 */
export function cardAnswer(card: MaskedCard, revealed: CardSecrets | undefined): CardResponse {
  return {
    cardId: card.cardId,
    pan: revealed ? revealed.pan : card.maskedPan,
    // Records written before maskedCvc was kept show the usual three stars.
    cvc: revealed ? revealed.cvc : (card.maskedCvc ?? '***'),
    expMonth: card.expMonth,
    expYear: card.expYear,
    status: card.status,
    requestedCardLimit: card.requestedCardLimit,
    cardLimit: card.cardLimit,
    currency: card.currency,
    createdAt: card.createdAt,
  };
}
