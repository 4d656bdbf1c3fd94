/**
 * The gateway's operations, each declared on the request pipeline: its request, its success and
 * how its answer reads, whether a wrong-shaped success may be retried, and what a refusal means.
 */
import type { ApiError, CardGatewayError } from './errors.js';
import type { OperationSpec } from './pipeline.js';
import type { CallScope } from './scope.js';
import type { Session, SessionState } from './session.js';
import { parseCard, parseCardPage, parseCardRecord, parseCardStatusAnswer, parseTokens } from './shapes.js';
import type { CardListQuery, CardPage, CardRecord, CardRequest, CardStatus, CardStatusAnswer, CreatedCard, SessionTokens } from './types.js';

const LOGIN = '/api/v1/auth/login';
const REFRESH = '/api/v1/auth/refresh';
const LOGOUT = '/api/v1/auth/logout';
const CARDS = '/api/v1/issuing/cards';

/**
 * 401 codes to a logout that mean the session is already over at the gateway (the refresh-token
 * family revoked, expired or unknown, the credential deactivated, or the session ended with its
 * credential's secret: `token_revoked`, whose session no refresh token can revive): what logout
 * asked for. Any other 401 (`token_expired`, `token_invalid`, ...) refused the access token
 * before the gateway looked at the refresh token, so nothing was revoked.
 */
export const SESSION_OVER_CODES: ReadonlySet<string> = new Set([
  'refresh_token_invalid',
  'refresh_token_expired',
  'refresh_token_revoked',
  'credential_inactive',
  'token_revoked',
]);

/**
 * An authenticated call of the current session: its access token, refreshed when due, and a 401
 * to it ends the session (unless a refresh replaced that token meanwhile).
 */
export function withSession(session: Session, scope: CallScope): Pick<OperationSpec<never>, 'bearer' | 'refused'> {
  return {
    bearer: () => session.freshAccessToken(session.require(), scope),
    refused: (error: ApiError, bearer: string | undefined): CardGatewayError =>
      error.status === 401 && bearer !== undefined ? session.rejected(bearer, error) : error,
  };
}

export const login = (username: string, password: string): OperationSpec<SessionTokens> => ({
  request: () => ({ method: 'POST', path: LOGIN, body: { username, password } }),
  success: [200],
  read: (answer) => parseTokens(answer.json),
  // Not retryable: another login would only open another session.
  retryInvalid: false,
});

/** The refresh shared by all callers (Session): presents the tokens it started with on every attempt. */
export const refresh = (presented: SessionTokens): OperationSpec<SessionTokens> => ({
  bearer: async () => presented.accessToken,
  request: () => ({ method: 'POST', path: REFRESH, body: { refreshToken: presented.refreshToken } }),
  success: [200],
  read: (answer) => parseTokens(answer.json),
  // Retryable within the grace: the old token still refreshes for 60 s.
  retryInvalid: true,
});

/**
 * Revokes `state`'s session with its newest tokens: waits for a refresh in flight (an older
 * refresh token past its grace would count as reuse), and refreshes first when due. Its 401s are
 * read by the caller (SESSION_OVER_CODES), not here.
 */
export const logout = (session: Session, state: SessionState, scope: CallScope): OperationSpec<true> => ({
  bearer: () => session.freshAccessToken(state, scope, true),
  request: () => ({ method: 'POST', path: LOGOUT, body: { refreshToken: state.tokens.refreshToken } }),
  success: [200],
  read: () => true,
});

export const createCard = (session: Session, scope: CallScope, body: CardRequest, revealDetails: boolean): OperationSpec<CreatedCard> => ({
  ...withSession(session, scope),
  request: () => ({ method: 'POST', path: CARDS, query: { revealDetails: revealDetails ? 'true' : undefined }, body }),
  success: [201, 200],
  read: (answer, attempt) => {
    const card = parseCard(answer.json);
    return (
      card && {
        card,
        requestId: body.requestId,
        replayed: answer.headers.get('idempotent-replayed') === 'true',
        payloadMismatch: answer.headers.get('idempotency-payload-mismatch') === 'true',
        correlationId: answer.correlationId,
        attempts: attempt,
      }
    );
  },
  // The card exists or will, and a retry with this requestId answers it again.
  retryInvalid: true,
});

const cardPath = (cardId: string): string => `${CARDS}/${encodeURIComponent(cardId)}`;

/** Reading repeats nothing: a wrong-shaped answer is worth another attempt, like any retryable failure. */
export const getCard = (session: Session, scope: CallScope, cardId: string, revealDetails: boolean): OperationSpec<CardRecord> => ({
  ...withSession(session, scope),
  request: () => ({ method: 'GET', path: cardPath(cardId), query: { revealDetails: revealDetails ? 'true' : undefined } }),
  success: [200],
  read: (answer) => parseCardRecord(answer.json),
  retryInvalid: true,
});

export const listCardsPage = (session: Session, scope: CallScope, query: CardListQuery): OperationSpec<CardPage> => ({
  ...withSession(session, scope),
  request: () => ({
    method: 'GET',
    path: CARDS,
    query: {
      limit: query.limit === undefined ? undefined : String(query.limit),
      cursor: query.cursor,
      status: query.status,
      createdAfter: query.createdAfter,
      createdBefore: query.createdBefore,
    },
  }),
  success: [200],
  read: (answer) => parseCardPage(answer.json),
  retryInvalid: true,
});

/**
 * Freeze, unfreeze, cancel: asking again for the status a card already has answers 200 and
 * changes nothing (`previousStatus` equals `status`), so every attempt may be repeated; 409
 * `card_canceled` is final (answer.ts).
 */
export const changeCardStatus = (
  session: Session,
  scope: CallScope,
  cardId: string,
  status: CardStatus,
  reason: string | undefined,
): OperationSpec<CardStatusAnswer> => ({
  ...withSession(session, scope),
  request: () => ({ method: 'PATCH', path: cardPath(cardId), body: reason === undefined ? { status } : { status, reason } }),
  success: [200],
  read: (answer) => parseCardStatusAnswer(answer.json),
  retryInvalid: true,
});
