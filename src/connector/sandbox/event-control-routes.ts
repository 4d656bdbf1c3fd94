import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { CARD_STATUSES, type CardStatus } from '../../foundation/card-status.js';
import { TRANSACTION_EVENT_TYPES, type TransactionEventType } from '../../foundation/event-types.js';
import { CONNECTOR_CARD_CANCELED, type ConnectorCardRecord } from '../connector-contract.js';
import type { ConnectorEvent, ConnectorMerchant } from '../connector-events-contract.js';
import type { SandboxState } from './sandbox-state.js';

/** A transaction's kind: the part of its event type after `transaction.`. */
const TRANSACTION_KINDS = TRANSACTION_EVENT_TYPES.map((type) => type.slice('transaction.'.length));

/** The merchant and decline reason of a simulated transaction that names none. */
export const SANDBOX_MERCHANT: ConnectorMerchant = { name: 'Sandbox Coffee Roasters', categoryCode: '5814', country: 'NL' };
export const SANDBOX_DECLINE_REASON = 'insufficient_funds';

interface TransactionBody {
  type: string;
  amount: number;
  currency?: string;
  merchant?: ConnectorMerchant;
  declineReason?: string;
}

interface ProcessorStatusBody {
  status: CardStatus;
  reason?: string;
}

interface CardParams {
  cardId: string;
}

const newId = (prefix: string): string => `${prefix}_${randomBytes(12).toString('hex')}`;

/** Free text is passed on as given (1 to 1000 characters): the gateway's listener is what checks it, and a test may want to see it refuse. */
const Text = { type: 'string', minLength: 1, maxLength: 1000 } as const;

/**
 * `/__control` for events (D64): simulate what a processor reports (a transaction on a card, a
 * status change made on the processor's side) and read what the outbox sent and was answered.
 * Every simulated event goes to the outbox, which posts it to the gateway's connector listener.
 */
export function registerEventControlRoutes(app: FastifyInstance, state: SandboxState, now: () => number): void {
  const { outbox } = state;
  const notFound = (reply: FastifyReply) => reply.code(404).send({ message: 'card not found' });
  const outboxFull = (reply: FastifyReply) => reply.code(503).send({ message: 'the events outbox is full: set a target (or reset) first' });
  const occurredAt = (): string => new Date(now()).toISOString();

  app.post<{ Params: CardParams; Body: TransactionBody }>('/__control/cards/:cardId/transactions', {
    schema: {
      body: {
        type: 'object',
        required: ['type', 'amount'],
        additionalProperties: false,
        properties: {
          type: { type: 'string', enum: TRANSACTION_KINDS },
          amount: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
          currency: { type: 'string', pattern: '^[A-Z]{3}$' },
          merchant: {
            type: 'object',
            required: ['name', 'categoryCode', 'country'],
            additionalProperties: false,
            properties: { name: Text, categoryCode: Text, country: Text },
          },
          declineReason: Text,
        },
      },
    },
    handler: async (request, reply) => {
      const entry = state.book.withId(request.params.cardId);
      if (!entry) return notFound(reply);
      if (outbox.full) return outboxFull(reply);
      const { record } = entry;
      const body = request.body;
      const type = `transaction.${body.type}` as TransactionEventType;
      const transactionId = newId('txn');
      const declineReason = body.declineReason ?? (type === 'transaction.declined' ? SANDBOX_DECLINE_REASON : undefined);
      const event = {
        eventId: newId('sbx_evt'),
        type,
        occurredAt: occurredAt(),
        issuingAccount: record.issuingAccount,
        data: {
          transactionId,
          cardId: record.cardId,
          amount: body.amount,
          currency: body.currency ?? record.currency,
          merchant: body.merchant ?? SANDBOX_MERCHANT,
          ...(declineReason !== undefined && { declineReason }),
        },
        // As asked, even where the contract would refuse it (a reason on an authorization): the listener answers for it.
      } as ConnectorEvent;
      outbox.add(event);
      return reply.code(202).send({ eventId: event.eventId, transactionId });
    },
  });

  app.post<{ Params: CardParams; Body: ProcessorStatusBody }>('/__control/cards/:cardId/processor-status', {
    schema: {
      body: {
        type: 'object',
        required: ['status'],
        additionalProperties: false,
        properties: { status: { type: 'string', enum: [...CARD_STATUSES] }, reason: Text },
      },
    },
    handler: async (request, reply) => {
      const entry = state.book.withId(request.params.cardId);
      if (!entry) return notFound(reply);
      if (outbox.full) return outboxFull(reply);
      const { status, reason } = request.body;
      const done = state.book.changeStatus(entry, status);
      if (done.outcome === 'refused_canceled')
        return reply.code(409).send({ message: 'the card is canceled; its status cannot change', code: CONNECTOR_CARD_CANCELED });
      const answer = { ...entry.record, previousStatus: done.previousStatus, changed: done.outcome === 'changed' };
      if (done.outcome === 'unchanged') return answer;
      // The record as it is now, copied: a later change must not alter what this event says.
      const card: ConnectorCardRecord = { ...entry.record, metadata: { ...entry.record.metadata } };
      const event: ConnectorEvent = {
        eventId: newId('sbx_evt'),
        type: 'card.status_changed',
        occurredAt: occurredAt(),
        issuingAccount: card.issuingAccount,
        data: { card, previousStatus: done.previousStatus, status, ...(reason !== undefined && { reason }) },
      };
      outbox.add(event);
      return { ...answer, eventId: event.eventId };
    },
  });

  app.get('/__control/events', async () => ({ target: outbox.target ?? null, events: outbox.entries() }));
}
