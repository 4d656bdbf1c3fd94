import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  checkConnectorEvent,
  connectorEventDedupe,
  connectorEventDraft,
  CONNECTOR_EVENT_TYPES,
  type ConnectorEventDraft,
} from '../../src/connector/connector-events-contract.js';
import { TRANSACTION_EVENT_TYPES } from '../../src/foundation/event-types.js';
import { connectorRecord, FULL_CVC, FULL_PAN, statusChangedBody, transactionBody } from '../support/connector-events.js';

/**
 * The contract of the connector's events (D63, D64), without HTTP: which bodies pass, and the
 * draft a valid one becomes. The listener's answers over TLS are in connector-listener.test.ts.
 */

/** The draft of a body that must pass. */
function draftOf(body: unknown): ConnectorEventDraft {
  const check = checkConnectorEvent(body);
  if (!check.ok) throw new Error(`refused: ${JSON.stringify(check.problems)}`);
  return connectorEventDraft(check.event);
}

/** `pointer message` of each problem of a body that must be refused. */
function problemsOf(body: unknown, isKnownAccount?: (account: string) => boolean): string[] {
  const check = checkConnectorEvent(body, isKnownAccount);
  if (check.ok) throw new Error('passed');
  return check.problems.map((problem) => `${problem.instancePath} ${problem.message}`);
}

/** Neither the PAN nor the CVC anywhere in the draft: both masked. */
function expectNoCardSecrets(draft: unknown): void {
  const json = JSON.stringify(draft);
  expect(json).not.toContain(FULL_PAN);
  expect(json).not.toMatch(/"pan":"[0-9]/);
  expect(json).not.toContain(`"${FULL_CVC}"`);
}

describe('connector events: the draft of a valid event', () => {
  it('card.status_changed: the card masked (no PAN, no CVC), source processor in the draft and in the data', () => {
    const body = statusChangedBody();
    const draft = draftOf(body);
    expect(draft).toEqual({
      type: 'card.status_changed',
      issuingAccount: 'acct-eu',
      cardId: 'card_0123456789abcdef',
      dedupe: connectorEventDedupe(body['eventId'] as string),
      source: 'processor',
      data: {
        card: {
          cardId: 'card_0123456789abcdef',
          pan: '************1111',
          cvc: '***',
          expMonth: 11,
          expYear: 2029,
          status: 'inactive',
          requestedCardLimit: 10_000,
          cardLimit: 10_500,
          currency: 'EUR',
          createdAt: '2026-11-01T10:00:00.000Z',
          requestId: '0b8e2d3c-5f4a-4c1e-9a7b-2f6d8e1c3a5b',
          metadata: { trip: 'Lisbon' },
        },
        previousStatus: 'active',
        status: 'inactive',
        reason: 'suspected fraud',
        source: 'processor',
      },
    });
    expectNoCardSecrets(draft);
  });

  it('card.status_changed without a reason has no reason member; a record without metadata gets {}', () => {
    const body = statusChangedBody({ card: connectorRecord({ metadata: undefined }) });
    delete (body['data'] as Record<string, unknown>)['reason'];
    const draft = draftOf(JSON.parse(JSON.stringify(body)));
    if (draft.type !== 'card.status_changed') throw new Error(draft.type);
    expect(draft.data).not.toHaveProperty('reason');
    expect(draft.data.card['metadata']).toEqual({});
  });

  it.each(TRANSACTION_EVENT_TYPES)('%s: the transaction with the envelope occurredAt, a decline with its reason', (type) => {
    const body = transactionBody(type);
    expect(draftOf(body)).toEqual({
      type,
      issuingAccount: 'acct-eu',
      cardId: 'card_0123456789abcdef',
      dedupe: connectorEventDedupe(body['eventId'] as string),
      source: 'processor',
      data: {
        transactionId: 'txn_42',
        cardId: 'card_0123456789abcdef',
        amount: 1250,
        currency: 'EUR',
        merchant: { name: 'Café Lisboa', categoryCode: '5814', country: 'PT' },
        occurredAt: '2026-11-29T09:00:00Z',
        ...(type === 'transaction.declined' && { declineReason: 'insufficient_funds' }),
      },
    });
  });

  it('the dedupe key is the base64url SHA-256 of the eventId: one per eventId', () => {
    const key = connectorEventDedupe('evt-1');
    expect(key).toBe(createHash('sha256').update('evt-1').digest('base64url'));
    expect(key).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(connectorEventDedupe('evt-1')).toBe(key);
    expect(connectorEventDedupe('evt-2')).not.toBe(key);
  });

  it('card.created is the gateway own event: a connector cannot send it', () => {
    expect(CONNECTOR_EVENT_TYPES).not.toContain('card.created');
    expect(problemsOf(statusChangedBody({}, { type: 'card.created' }))).toEqual([`/type must be equal to one of the allowed values`]);
  });
});

describe('connector events: the bounds of each member, just inside and just outside', () => {
  const inside = (body: Record<string, unknown>) => expect(checkConnectorEvent(body).ok, JSON.stringify(body)).toBe(true);

  it('eventId: 1 to 128 of [A-Za-z0-9._:-]', () => {
    inside(transactionBody(undefined, {}, { eventId: 'a' }));
    inside(transactionBody(undefined, {}, { eventId: `A.b_c:d-${'9'.repeat(120)}` }));
    expect(problemsOf(transactionBody(undefined, {}, { eventId: 'x'.repeat(129) }))).toEqual(['/eventId must NOT have more than 128 characters']);
    expect(problemsOf(transactionBody(undefined, {}, { eventId: '' }))).toEqual(['/eventId must NOT have fewer than 1 characters']);
    expect(problemsOf(transactionBody(undefined, {}, { eventId: 'a/b' }))).toEqual(['/eventId must match pattern "^[A-Za-z0-9._:-]*$"']);
  });

  it('amount: an integer from 0; merchant name 1 to 100 characters; MCC 4 digits; country 2 capitals; currency 3 capitals', () => {
    inside(transactionBody(undefined, { amount: 0 }));
    inside(transactionBody(undefined, { merchant: { name: 'x'.repeat(100), categoryCode: '0000', country: 'NL' } }));
    expect(problemsOf(transactionBody(undefined, { amount: -1 }))).toEqual(['/data/amount must be >= 0']);
    expect(problemsOf(transactionBody(undefined, { amount: 1.5 }))).toEqual(['/data/amount must be integer']);
    expect(problemsOf(transactionBody(undefined, { merchant: { name: 'x'.repeat(101), categoryCode: '58141', country: 'nl' } }))).toEqual([
      '/data/merchant/name must NOT have more than 100 characters',
      '/data/merchant/categoryCode must match pattern "^[0-9]{4}$"',
      '/data/merchant/country must match pattern "^[A-Z]{2}$"',
    ]);
    expect(problemsOf(transactionBody(undefined, { merchant: { name: '', categoryCode: '581', country: 'NLD' } }))).toEqual([
      '/data/merchant/name must NOT have fewer than 1 characters',
      '/data/merchant/categoryCode must match pattern "^[0-9]{4}$"',
      '/data/merchant/country must match pattern "^[A-Z]{2}$"',
    ]);
    expect(problemsOf(transactionBody(undefined, { currency: 'eur' }))).toEqual(['/data/currency must match pattern "^[A-Z]{3}$"']);
  });

  it('declineReason: required on a decline, refused on every other transaction', () => {
    const declined = transactionBody('transaction.declined');
    delete (declined['data'] as Record<string, unknown>)['declineReason'];
    expect(problemsOf(declined)).toEqual(["/data must have required property 'declineReason'"]);
    for (const type of ['transaction.authorized', 'transaction.cleared', 'transaction.reversed'] as const) {
      expect(problemsOf(transactionBody(type, { declineReason: 'x' }))).toEqual(['/data must NOT have additional properties']);
    }
  });

  it('occurredAt: a real UTC instant', () => {
    inside(transactionBody(undefined, {}, { occurredAt: '2028-02-29T23:59:59.999999Z' }));
    expect(problemsOf(transactionBody(undefined, {}, { occurredAt: '2026-02-29T00:00:00Z' }))).toEqual(['/occurredAt is not a real instant']);
    expect(problemsOf(transactionBody(undefined, {}, { occurredAt: '2026-11-29T09:00:00+01:00' }))).toHaveLength(1);
  });

  it('a status change agrees with its card: the same account, the card at the new status, a status that changed', () => {
    expect(problemsOf(statusChangedBody({ card: connectorRecord({ issuingAccount: 'acct-uk' }) }))).toEqual([
      "/data/card/issuingAccount must be the event's issuingAccount",
    ]);
    expect(problemsOf(statusChangedBody({ card: connectorRecord({ status: 'active' }) }))).toEqual(['/data/card/status must be data.status']);
    expect(problemsOf(statusChangedBody({ previousStatus: 'inactive' }))).toEqual(['/data/previousStatus must differ from data.status']);
  });

  it('a card record is closed too: a member beyond the record of GET /v1/cards/{cardId} is refused', () => {
    expect(problemsOf(statusChangedBody({ card: connectorRecord({ changed: true }) }))).toEqual(['/data/card must NOT have additional properties']);
  });

  it('an issuing account the gateway does not serve is refused, with the other problems', () => {
    const known = (account: string) => account === 'acct-eu';
    expect(checkConnectorEvent(transactionBody(), known).ok).toBe(true);
    expect(problemsOf(transactionBody(undefined, { amount: -1 }, { issuingAccount: 'acct-zz' }), known)).toEqual([
      '/data/amount must be >= 0',
      '/issuingAccount is not an issuing account of this gateway',
    ]);
  });
});

describe('connector events: no card number in free text (D58), identifiers exempt', () => {
  const PAN_12 = '411111111117'; // 12 digits, Luhn-valid: the shortest card number D58 knows
  const NOT_PAN_11 = '41111111117';

  it('the free-text members are checked: reason, merchant name, decline reason, metadata values and names', () => {
    expect(
      problemsOf(transactionBody(undefined, { merchant: { name: `Shop ${FULL_PAN.replace(/(\d{4})/g, '$1 ')}`, categoryCode: '5814', country: 'PT' } })),
    ).toEqual(['/data/merchant/name looks like a card number']);
    expect(problemsOf(transactionBody('transaction.declined', { declineReason: `card ${PAN_12} blocked` }))).toEqual([
      '/data/declineReason looks like a card number',
    ]);
    expect(problemsOf(statusChangedBody({ reason: `lost ${FULL_PAN}` }))).toEqual(['/data/reason looks like a card number']);
    expect(problemsOf(statusChangedBody({ card: connectorRecord({ metadata: { note: FULL_PAN, [PAN_12]: 'x', 'a/b~c': PAN_12 } }) }))).toEqual([
      '/data/card/metadata/note looks like a card number',
      `/data/card/metadata/${PAN_12} has a name that looks like a card number`,
      '/data/card/metadata/a~1b~0c looks like a card number',
    ]);
  });

  it('11 digits are no card number; identifiers of card-number shape are not checked', () => {
    const check = checkConnectorEvent(
      transactionBody(
        undefined,
        { transactionId: FULL_PAN, merchant: { name: `Shop ${NOT_PAN_11}`, categoryCode: '5814', country: 'PT' } },
        { eventId: FULL_PAN },
      ),
    );
    expect(check.ok).toBe(true);
  });
});
