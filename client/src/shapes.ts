/**
 * The documented shapes of the gateway's answers, checked at run time: a body that does not
 * have its route's shape is reported as `invalid_response`, never handed on half-read.
 */
import { CARD_STATUSES, type Card, type CardStatus, type SessionTokens } from './types.js';

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
