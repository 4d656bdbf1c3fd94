import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { ConnectorCardRecord } from '../../src/connector/connector-contract.js';
import { startSandboxConnector, type OutboxEntry, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { connectorCertificates } from '../support/connector-certificates.js';
import { FULL_PAN } from '../support/connector-events.js';
import { connectorListener, type ListenerFixture } from '../support/connector-listener.js';
import { waitFor, withinHangGuard } from '../support/wait.js';

/**
 * The sandbox connector's side of events (D64): its control routes simulate what a processor
 * reports, and its outbox posts each event to a real connector listener over TLS, retrying until
 * 200/202/400. Retries wait at most a few milliseconds here (eventsRetry): a test waits for
 * state, never for a duration.
 */

const SECRET = 'connector-secret-0123456789';
const RETRY = { initialMs: 1, maxMs: 5 };
const opened: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((thing) => thing.close()));
});

async function setup(
  options: { target?: boolean } = {},
): Promise<{ l: ListenerFixture; sandbox: RunningSandboxConnector; target: { url: string; secret: string; ca: string } }> {
  const l = await connectorListener({ secret: SECRET });
  opened.push(l);
  const target = { url: l.url, secret: SECRET, ca: (await connectorCertificates()).ca };
  const sandbox = await startSandboxConnector({ controls: true, eventsRetry: RETRY, ...(options.target !== false && { eventsTarget: target }) });
  opened.push(sandbox);
  return { l, sandbox, target };
}

async function createCard(sandbox: RunningSandboxConnector, issuingAccount = 'acct-eu'): Promise<ConnectorCardRecord> {
  const requestId = randomUUID();
  const res = await sandbox.app.inject({
    method: 'POST',
    url: '/v1/cards',
    headers: { 'idempotency-key': `${issuingAccount}:${requestId}` },
    payload: { requestId, issuingAccount, requestedCardLimit: 500, cardLimit: 500, currency: 'EUR' },
  });
  expect(res.statusCode, res.body).toBe(201);
  const read = await sandbox.app.inject({ method: 'GET', url: `/v1/cards/${res.json<{ cardId: string }>().cardId}?issuingAccount=${issuingAccount}` });
  return read.json<ConnectorCardRecord>();
}

const control = (sandbox: RunningSandboxConnector, url: string, payload: Record<string, unknown>) => sandbox.app.inject({ method: 'POST', url, payload });

async function outbox(sandbox: RunningSandboxConnector): Promise<OutboxEntry[]> {
  return (await sandbox.app.inject({ method: 'GET', url: '/__control/events' })).json<{ events: OutboxEntry[] }>().events;
}

/** The outbox entry of `eventId` once it is no longer pending. */
const settled = (sandbox: RunningSandboxConnector, eventId: string): Promise<OutboxEntry> =>
  waitFor(`event ${eventId} settled`, async () => (await outbox(sandbox)).find((entry) => entry.eventId === eventId && entry.state !== 'pending'));

describe('sandbox connector: simulated transactions', () => {
  it('posts the transaction to the listener and retries a 503 until it is recorded (202)', async () => {
    const { l, sandbox } = await setup();
    const card = await createCard(sandbox);
    l.storeDown.calls = 1;
    const res = await control(sandbox, `/__control/cards/${card.cardId}/transactions`, { type: 'authorized', amount: 1250 });
    expect(res.statusCode, res.body).toBe(202);
    const { eventId, transactionId } = res.json<{ eventId: string; transactionId: string }>();
    const entry = await settled(sandbox, eventId);
    expect(entry).toMatchObject({ state: 'delivered', attempts: 2, type: 'transaction.authorized', issuingAccount: 'acct-eu' });
    expect(entry.answers.map((answer) => ('status' in answer ? answer.status : answer.error))).toEqual([503, 202]);
    expect(l.outcomes).toEqual(['unavailable', 'recorded']);
    const [json] = await l.stored('acct-eu');
    expect(JSON.parse(json!)).toMatchObject({
      type: 'transaction.authorized',
      sequence: 1,
      data: { transactionId, cardId: card.cardId, amount: 1250, currency: 'EUR', merchant: { categoryCode: '5814' } },
    });
  });

  it('a 400 is not retried: the outbox moves on to the next event', async () => {
    const { l, sandbox } = await setup();
    const card = await createCard(sandbox);
    const bad = await control(sandbox, `/__control/cards/${card.cardId}/transactions`, {
      type: 'cleared',
      amount: 1,
      merchant: { name: `Shop ${FULL_PAN}`, categoryCode: '5814', country: 'NL' },
    });
    const good = await control(sandbox, `/__control/cards/${card.cardId}/transactions`, { type: 'declined', amount: 2 });
    const delivered = await settled(sandbox, good.json<{ eventId: string }>().eventId);
    const refused = await settled(sandbox, bad.json<{ eventId: string }>().eventId);
    expect(refused).toMatchObject({ state: 'refused', attempts: 1, answers: [{ status: 400 }] });
    expect(delivered).toMatchObject({ state: 'delivered', attempts: 1, answers: [{ status: 202 }] });
    // A decline named without its reason gets the sandbox's, so the listener records it.
    expect(delivered.sent).toMatchObject({ type: 'transaction.declined', data: { declineReason: 'insufficient_funds' } });
    expect(l.outcomes).toEqual(['invalid', 'recorded']);
  });

  it('holds events until a target is set, then sends them', async () => {
    const { l, sandbox, target } = await setup({ target: false });
    const card = await createCard(sandbox);
    const res = await control(sandbox, `/__control/cards/${card.cardId}/transactions`, { type: 'reversed', amount: 3, currency: 'USD' });
    expect((await outbox(sandbox)).map((entry) => [entry.state, entry.attempts])).toEqual([['pending', 0]]);
    sandbox.setEventsTarget(target);
    expect(await settled(sandbox, res.json<{ eventId: string }>().eventId)).toMatchObject({ state: 'delivered', sent: { data: { currency: 'USD' } } });
    expect(l.outcomes).toEqual(['recorded']);
  });

  it('refuses a card it does not know (404) and a kind of transaction that does not exist (400)', async () => {
    const { sandbox } = await setup();
    const card = await createCard(sandbox);
    expect((await control(sandbox, '/__control/cards/card_unknown/transactions', { type: 'authorized', amount: 1 })).statusCode).toBe(404);
    expect((await control(sandbox, `/__control/cards/${card.cardId}/transactions`, { type: 'refunded', amount: 1 })).statusCode).toBe(400);
    expect((await control(sandbox, `/__control/cards/${card.cardId}/transactions`, { type: 'authorized', amount: -1 })).statusCode).toBe(400);
    expect(await outbox(sandbox)).toEqual([]);
  });

  it('close stops the retries of a listener that keeps answering 503', async () => {
    const { l, sandbox } = await setup();
    const card = await createCard(sandbox);
    l.storeDown.calls = Number.MAX_SAFE_INTEGER;
    const res = await control(sandbox, `/__control/cards/${card.cardId}/transactions`, { type: 'authorized', amount: 1 });
    const eventId = res.json<{ eventId: string }>().eventId;
    await waitFor('a few retries', async () => (await outbox(sandbox)).find((entry) => entry.eventId === eventId && entry.attempts >= 3));
    await withinHangGuard('sandbox close', sandbox.close());
    const attempts = l.drafts.length;
    // One more event loop turn for any attempt that could still have been under way.
    await new Promise((resolve) => setImmediate(resolve));
    expect(l.drafts).toHaveLength(attempts);
  });
});

describe('sandbox connector: processor-side status changes', () => {
  it('changes the card (GET shows it) and posts card.status_changed with source processor, the card masked once recorded', async () => {
    const { l, sandbox } = await setup();
    const card = await createCard(sandbox);
    const res = await control(sandbox, `/__control/cards/${card.cardId}/processor-status`, { status: 'inactive', reason: 'expired at the processor' });
    expect(res.statusCode, res.body).toBe(200);
    const answer = res.json<ConnectorCardRecord & { previousStatus: string; changed: boolean; eventId: string }>();
    expect(answer).toMatchObject({ cardId: card.cardId, status: 'inactive', previousStatus: 'active', changed: true });
    const read = await sandbox.app.inject({ method: 'GET', url: `/v1/cards/${card.cardId}?issuingAccount=acct-eu` });
    expect(read.json<ConnectorCardRecord>().status).toBe('inactive');

    const entry = await settled(sandbox, answer.eventId);
    expect(entry).toMatchObject({ state: 'delivered', type: 'card.status_changed' });
    const [json] = await l.stored('acct-eu');
    expect(json).not.toContain(card.pan);
    expect(JSON.parse(json!)).toMatchObject({
      type: 'card.status_changed',
      data: {
        card: { cardId: card.cardId, status: 'inactive', pan: `************${card.pan.slice(-4)}` },
        previousStatus: 'active',
        status: 'inactive',
        reason: 'expired at the processor',
        source: 'processor',
      },
    });
  });

  it('the same status again changes nothing and posts nothing; a canceled card refuses any other (409)', async () => {
    const { sandbox } = await setup();
    const card = await createCard(sandbox);
    const url = `/__control/cards/${card.cardId}/processor-status`;
    const same = await control(sandbox, url, { status: 'active' });
    expect([same.statusCode, same.json<{ changed: boolean }>().changed, same.json<{ eventId?: string }>().eventId]).toEqual([200, false, undefined]);
    expect(await outbox(sandbox)).toEqual([]);
    expect((await control(sandbox, url, { status: 'canceled' })).statusCode).toBe(200);
    const after = await control(sandbox, url, { status: 'active' });
    expect([after.statusCode, after.json<{ code: string }>().code]).toEqual([409, 'card_canceled']);
    expect((await outbox(sandbox)).map((entry) => entry.type)).toEqual(['card.status_changed']);
  });
});
