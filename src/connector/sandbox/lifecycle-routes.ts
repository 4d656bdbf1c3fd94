import type { FastifyInstance } from 'fastify';
import { CONNECTOR_CARD_CANCELED, CONNECTOR_PATHS, type ConnectorCardRecord } from '../connector-contract.js';
import { parseCardQuery, parseListQuery, parseStatusChange } from './lifecycle-input.js';
import { encodeCursor } from './list-cursor.js';
import { FOREIGN_ACCOUNT, type SandboxMode } from './sandbox-types.js';
import { answeredByFault, sendAnswer, type Answer, type SandboxState } from './sandbox-state.js';

const NOT_FOUND: Answer = { status: 404, body: { message: 'card not found' } };
const CANCELED: Answer = { status: 409, body: { message: 'the card is canceled; its status cannot change', code: CONNECTOR_CARD_CANCELED } };

interface CardParams {
  cardId: string;
}

/** `foreign-account`: the record names an account other than the caller's (its real owner's, or a made-up one). */
function foreign(record: ConnectorCardRecord, caller: string): ConnectorCardRecord {
  if (record.issuingAccount !== caller) return record;
  return { ...record, issuingAccount: caller === FOREIGN_ACCOUNT ? `${FOREIGN_ACCOUNT}-2` : FOREIGN_ACCOUNT };
}

/** `wrong-shape`: a whole record but for one member of the wrong type. */
const misshapen = (record: ConnectorCardRecord): unknown => ({ ...record, cardLimit: String(record.cardLimit) });

function shaped(record: ConnectorCardRecord, caller: string, mode: SandboxMode): unknown {
  if (mode === 'foreign-account') return foreign(record, caller);
  if (mode === 'wrong-shape') return misshapen(record);
  return record;
}

/**
 * The lifecycle calls (D43-D45): a card is found only in its own account (404 otherwise, the
 * same as for an unknown id), lists are newest first in keyset pages (card-book.ts), a canceled
 * card never changes again. Under `foreign-account` the ownership check is off and the answer's
 * record (a page's last one) names another account: the connector bug the gateway must catch.
 */
export function registerLifecycleRoutes(scope: FastifyInstance, state: SandboxState): void {
  const { book } = state;
  const find = (caller: string, cardId: string, mode: SandboxMode) => (mode === 'foreign-account' ? book.withId(cardId) : book.owned(caller, cardId));

  scope.get<{ Params: CardParams }>('/v1/cards/:cardId', async (request, reply) => {
    const mode = state.modes.take();
    if (answeredByFault(request, reply, mode, 200)) return reply;
    const caller = parseCardQuery(request.query);
    const entry = find(caller, request.params.cardId, mode.mode);
    return sendAnswer(state, reply, mode, entry ? { status: 200, body: shaped(entry.record, caller, mode.mode) } : NOT_FOUND);
  });

  scope.get(CONNECTOR_PATHS.listCards, async (request, reply) => {
    const mode = state.modes.take();
    if (answeredByFault(request, reply, mode, 200)) return reply;
    const { issuingAccount, filter } = parseListQuery(request.query);
    const { entries, next } = book.page(issuingAccount, filter);
    const data: unknown[] = entries.map((entry) => entry.record);
    const last = entries[entries.length - 1];
    if (last) data[data.length - 1] = shaped(last.record, issuingAccount, mode.mode);
    else if (mode.mode === 'wrong-shape') data.push({ cardId: 42 });
    return sendAnswer(state, reply, mode, { status: 200, body: { data, nextCursor: next ? encodeCursor(next) : null } });
  });

  scope.post<{ Params: CardParams }>('/v1/cards/:cardId/status', async (request, reply) => {
    state.log.lastBody = request.body ?? null;
    const mode = state.modes.take();
    if (answeredByFault(request, reply, mode, 200)) return reply;
    const change = parseStatusChange(request.body);
    const entry = find(change.issuingAccount, request.params.cardId, mode.mode);
    if (!entry) return sendAnswer(state, reply, mode, NOT_FOUND);
    // The answer is broken, so the change is not made: like a creation answered with the wrong shape.
    if (mode.mode === 'wrong-shape') return sendAnswer(state, reply, mode, { status: 200, body: misshapen(entry.record) });
    const done = book.changeStatus(entry, change.status);
    if (done.outcome === 'refused_canceled') return sendAnswer(state, reply, mode, CANCELED);
    // D57: the card after the call, what it was before, and whether this call changed it.
    const answer = {
      ...(shaped(entry.record, change.issuingAccount, mode.mode) as ConnectorCardRecord),
      previousStatus: done.previousStatus,
      changed: done.outcome === 'changed',
    };
    return sendAnswer(state, reply, mode, { status: 200, body: answer });
  });
}
