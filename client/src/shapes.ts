/**
 * The documented shapes of the gateway's answers, checked at run time: a body that does not
 * have its route's shape is reported as `invalid_response`, never handed on half-read.
 */
import { CARD_STATUSES, type Card, type CardPage, type CardRecord, type CardStatus, type CardStatusAnswer, type SessionTokens } from './types.js';

export const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

const isInteger = (value: unknown): value is number => Number.isSafeInteger(value);

const isCardStatus = (value: unknown): value is CardStatus => (CARD_STATUSES as readonly unknown[]).includes(value);

/** A card record (POST /api/v1/issuing/cards), or undefined when the body is not one. */
export function parseCard(value: unknown): Card | undefined {
  if (!isRecord(value)) return undefined;
  const { cardId, pan, cvc, expMonth, expYear, status, requestedCardLimit, cardLimit, currency, createdAt } = value;
  if (typeof cardId !== 'string' || typeof pan !== 'string' || typeof cvc !== 'string' || typeof currency !== 'string' || typeof createdAt !== 'string')
    return undefined;
  if (!isInteger(expMonth) || !isInteger(expYear) || !isInteger(requestedCardLimit) || !isInteger(cardLimit)) return undefined;
  if (!isCardStatus(status)) return undefined;
  return { cardId, pan, cvc, expMonth, expYear, status, requestedCardLimit, cardLimit, currency, createdAt };
}

/** The tokens of a login or refresh answer, or undefined when the body is not that. */
export function parseTokens(value: unknown): SessionTokens | undefined {
  if (!isRecord(value)) return undefined;
  const { accessToken, accessTokenExpiresAt, refreshToken, refreshTokenExpiresAt, idToken, idTokenExpiresAt } = value;
  if (typeof accessToken !== 'string' || typeof refreshToken !== 'string' || !isInteger(accessTokenExpiresAt) || !isInteger(refreshTokenExpiresAt))
    return undefined;
  const tokens: SessionTokens = { accessToken, accessTokenExpiresAt, refreshToken, refreshTokenExpiresAt };
  if (typeof idToken === 'string' && isInteger(idTokenExpiresAt)) Object.assign(tokens, { idToken, idTokenExpiresAt });
  return tokens;
}

const isStringRecord = (value: unknown): value is Record<string, string> =>
  isRecord(value) && Object.values(value).every((member) => typeof member === 'string');

/** A card as reading, listing and status changes answer it, or undefined when the body is not one. */
export function parseCardRecord(value: unknown): CardRecord | undefined {
  const card = parseCard(value);
  if (!card || !isRecord(value) || typeof value.requestId !== 'string' || !isStringRecord(value.metadata)) return undefined;
  return { ...card, requestId: value.requestId, metadata: { ...value.metadata } };
}

/**
 * A status change's answer: the whole card with its previous status, or exactly the id and the
 * two statuses (a credential without `cards:read`); undefined when the body is neither.
 */
export function parseCardStatusAnswer(value: unknown): CardStatusAnswer | undefined {
  if (!isRecord(value) || !isCardStatus(value.previousStatus)) return undefined;
  const { previousStatus } = value;
  const card = parseCardRecord(value);
  if (card) return { ...card, previousStatus };
  const { cardId, status } = value;
  if (typeof cardId !== 'string' || !isCardStatus(status) || Object.keys(value).length !== 3) return undefined;
  return { cardId, status, previousStatus };
}

/** A page of the card list, or undefined when the body (or any card in it) is not one. */
export function parseCardPage(value: unknown): CardPage | undefined {
  if (!isRecord(value) || !Array.isArray(value.data) || !(value.nextCursor === null || typeof value.nextCursor === 'string')) return undefined;
  const data: CardRecord[] = [];
  for (const entry of value.data as unknown[]) {
    const card = parseCardRecord(entry);
    if (!card) return undefined;
    data.push(card);
  }
  return { data, nextCursor: value.nextCursor };
}
