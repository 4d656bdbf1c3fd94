import type { FastifyInstance } from 'fastify';
import { CONNECTOR_HEADERS, CONNECTOR_PATHS, connectorIdempotencyKey, describeContractError, isConnectorCardRequest } from '../connector-contract.js';
import type { NewCard } from './card-maker.js';
import { creationAnswer } from './card-maker.js';
import { BadRequest } from './sandbox-types.js';
import { answeredByFault, sendAnswer, type SandboxState } from './sandbox-state.js';

const DEFAULT_EXPIRY_MONTHS = 36;

function parseCardRequest(body: unknown, key: string): NewCard {
  if (!isConnectorCardRequest(body)) throw new BadRequest(describeContractError(isConnectorCardRequest.errors));
  // A gateway that builds the key from anything else would break D17's retry guarantee.
  if (key !== connectorIdempotencyKey(body.issuingAccount, body.requestId)) throw new BadRequest('Idempotency-Key must be issuingAccount:requestId');
  return {
    requestId: body.requestId,
    issuingAccount: body.issuingAccount,
    requestedCardLimit: body.requestedCardLimit,
    cardLimit: body.cardLimit,
    currency: body.currency,
    expiryMonths: body.config?.expiryDuration ?? DEFAULT_EXPIRY_MONTHS,
    metadata: body.metadata ?? {},
  };
}

/**
 * `POST /v1/cards`: one card per Idempotency-Key, ever. A repeat of the key answers 200 with
 * that card as it is now. `delay` and `drip` make the card before answering late (the
 * ambiguous failure of D31); the other faults make none.
 */
export function registerCreationRoute(scope: FastifyInstance, state: SandboxState): void {
  scope.post(CONNECTOR_PATHS.createCard, async (request, reply) => {
    state.log.lastBody = request.body ?? null;
    const mode = state.modes.take();
    if (answeredByFault(request, reply, mode, 201)) return reply;
    if (mode.mode === 'wrong-shape') return reply.code(201).send({ cardId: 42 });
    const key = request.headers[CONNECTOR_HEADERS.idempotencyKey];
    if (typeof key !== 'string' || key === '') throw new BadRequest('Idempotency-Key header is required');
    const input = parseCardRequest(request.body, key);
    // Lookup and insert with no await between them: concurrent repeats never make two cards.
    const existing = state.book.withKey(key);
    const entry = existing ?? state.book.add(key, state.maker.make(input));
    if (existing !== undefined) reply.header('idempotent-replayed', 'true');
    return sendAnswer(state, reply, mode, { status: existing === undefined ? 201 : 200, body: creationAnswer(entry.record) });
  });
}
