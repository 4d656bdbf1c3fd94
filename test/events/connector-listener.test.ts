import type { LightMyRequestResponse } from 'fastify';
import selfsigned from 'selfsigned';
import { afterEach, describe, expect, expectTypeOf, it } from 'vitest';
import type { GatewayConfig } from '../../src/config/config-types.js';
import { CONNECTOR_EVENT_BODY_LIMIT, type ConnectorListenerSettings } from '../../src/edge/connector-listener.js';
import { connectorCertificates } from '../support/connector-certificates.js';
import { connectorRecord, FULL_CVC, FULL_PAN, statusChangedBody, transactionBody } from '../support/connector-events.js';
import { connectorListener, postOverTls, type ListenerFixture } from '../support/connector-listener.js';

/**
 * The connector listener (D64) on real TLS sockets: who may post (secret, mutual TLS), what each
 * answer is (202, 200 for a repeat, 400 with the problems, 401, 503 with Retry-After, 404, 405,
 * 413, 415), and that no PAN or CVC goes past it. Body problems are checked over inject, the
 * same routing without a socket.
 */

const SECRET = 'connector-secret-0123456789';
const listeners: ListenerFixture[] = [];
afterEach(async () => {
  await Promise.all(listeners.splice(0).map((listener) => listener.close()));
});

async function listener(options: Parameters<typeof connectorListener>[0] = {}): Promise<ListenerFixture> {
  const made = await connectorListener(options);
  listeners.push(made);
  return made;
}

const withSecret = (secret = SECRET) => ({ headers: { 'x-connector-secret': secret } });

it('takes the gateway config as it is: wiring is one call', () => {
  expectTypeOf<GatewayConfig>().toExtend<ConnectorListenerSettings>();
});

describe('connector listener: the connector secret', () => {
  it('records with the right secret (202, the id and sequence), refuses a wrong, a shorter or a missing one (401)', async () => {
    const l = await listener({ secret: SECRET });
    for (const headers of [withSecret('wrong-secret'), withSecret(SECRET.slice(0, -1)), withSecret(`${SECRET}x`), {}]) {
      const refused = await postOverTls(l.url, transactionBody(), headers);
      expect(refused.status).toBe(401);
      expect(refused.body).toMatchObject({ status: 401, code: 'authentication_failed', details: {} });
      expect(refused.headers['www-authenticate']).toBeUndefined();
    }
    expect(l.drafts).toEqual([]);
    const recorded = await postOverTls(l.url, transactionBody(), withSecret());
    expect(recorded.status).toBe(202);
    expect(recorded.body).toEqual({ id: expect.stringMatching(/^evt_[0-9A-Z]{26}$/), sequence: 1 });
    expect(l.outcomes).toEqual(['unauthenticated', 'unauthenticated', 'unauthenticated', 'unauthenticated', 'recorded']);
  });

  it('nothing answers a stranger but 401: no 404 or 405 tells it which paths exist', async () => {
    const l = await listener({ secret: SECRET });
    expect((await postOverTls(l.url, {}, { path: '/v1/cards' })).status).toBe(401);
    expect((await postOverTls(l.url, {}, { ...withSecret(), path: '/v1/cards' })).status).toBe(404);
  });

  it('without a secret or a client CA (local runs), whoever reaches the address may post', async () => {
    const l = await listener();
    expect((await postOverTls(l.url, transactionBody())).status).toBe(202);
  });
});

describe('connector listener: mutual TLS', () => {
  async function strangerCertificate(): Promise<{ cert: string; key: string }> {
    const made = await selfsigned.generate([{ name: 'commonName', value: 'card-gateway' }], { keyType: 'ec', algorithm: 'sha256' });
    return { cert: made.cert, key: made.private };
  }

  it('records for a client certificate the CA signed; no certificate, or one of another CA, never gets a request through', async () => {
    const pems = await connectorCertificates();
    const l = await listener({ clientCa: pems.ca });
    const signed = await postOverTls(l.url, transactionBody(), { cert: pems.client.cert, key: pems.client.key });
    expect(signed.status).toBe(202);
    await expect(postOverTls(l.url, transactionBody())).rejects.toThrow();
    const stranger = await strangerCertificate();
    await expect(postOverTls(l.url, transactionBody(), stranger)).rejects.toThrow();
    expect(l.drafts).toHaveLength(1);
    expect(l.outcomes).toEqual(['recorded']);
  });

  it('with both configured, both are required: the right certificate without the secret is 401', async () => {
    const pems = await connectorCertificates();
    const l = await listener({ clientCa: pems.ca, secret: SECRET });
    const client = { cert: pems.client.cert, key: pems.client.key };
    expect((await postOverTls(l.url, transactionBody(), client)).status).toBe(401);
    expect((await postOverTls(l.url, transactionBody(), { ...client, ...withSecret() })).status).toBe(202);
  });
});

describe('connector listener: recording', () => {
  it('a repeat of an eventId answers 200 with the first recording, and records nothing; another eventId is the next sequence', async () => {
    const l = await listener({ secret: SECRET });
    const body = statusChangedBody();
    const first = await postOverTls(l.url, body, withSecret());
    const again = await postOverTls(l.url, body, withSecret());
    expect([first.status, again.status]).toEqual([202, 200]);
    expect(again.body).toEqual(first.body);
    const next = await postOverTls(l.url, statusChangedBody(), withSecret());
    expect([next.status, next.body['sequence']]).toEqual([202, 2]);
    expect(await l.stored('acct-eu')).toHaveLength(2);
    expect(l.outcomes).toEqual(['recorded', 'repeat', 'recorded']);
  });

  it('stores the masked card, marked as the processor change: no PAN or CVC in the stored JSON or the log', async () => {
    const l = await listener({ secret: SECRET });
    await postOverTls(l.url, statusChangedBody(), withSecret());
    await postOverTls(l.url, transactionBody(undefined, { merchant: { name: `Shop ${FULL_PAN}`, categoryCode: '5814', country: 'PT' } }), withSecret());
    const [json] = await l.stored('acct-eu');
    expect(json).toBeDefined();
    expect(json).not.toContain(FULL_PAN);
    expect(json).not.toMatch(/"pan":"[0-9]/);
    expect(json).not.toContain(`"${FULL_CVC}"`);
    const event = JSON.parse(json!) as { type: string; sequence: number; data: { card: { pan: string; cvc: string }; source: string } };
    expect(event).toMatchObject({ type: 'card.status_changed', sequence: 1, data: { card: { pan: '************1111', cvc: '***' }, source: 'processor' } });
    expect(l.logs.text()).toContain('connector event refused');
    expect(l.logs.text()).not.toContain(FULL_PAN);
  });

  it('answers 503 with Retry-After while the store cannot record, and records the same event once it can (202, not a repeat)', async () => {
    const l = await listener({ secret: SECRET });
    const body = transactionBody('transaction.cleared');
    l.storeDown.calls = 1;
    const down = await postOverTls(l.url, body, withSecret());
    expect(down.status).toBe(503);
    expect(down.headers['retry-after']).toBe('1');
    expect(down.body).toMatchObject({ code: 'store_unavailable', retryAfter: 1 });
    const back = await postOverTls(l.url, body, withSecret());
    expect([back.status, back.body['sequence']]).toEqual([202, 1]);
    expect(l.outcomes).toEqual(['unavailable', 'recorded']);
  });
});

describe('connector listener: what is not an event', () => {
  it('POST /v1/events only: another path is 404, another method 405 with Allow', async () => {
    const l = await listener({ listen: false });
    const other = await l.app.inject({ method: 'POST', url: '/v1/event', payload: transactionBody() });
    expect([other.statusCode, other.json<{ code: string }>().code]).toEqual([404, 'not_found']);
    const get = await l.app.inject({ method: 'GET', url: '/v1/events' });
    expect([get.statusCode, get.headers['allow'], get.json<{ code: string }>().code]).toEqual([405, 'POST', 'method_not_allowed']);
    expect(l.outcomes).toEqual([]);
  });

  it('a body of 64 KiB is read, one byte more is 413; JSON only (415)', async () => {
    const l = await listener({ listen: false });
    const sized = (bytes: number): string => {
      const body = statusChangedBody({ card: connectorRecord({ metadata: { pad: '' } }) });
      const bare = JSON.stringify(body).length;
      return JSON.stringify(statusChangedBody({ card: connectorRecord({ metadata: { pad: 'x'.repeat(bytes - bare) } }) }, { eventId: body['eventId'] }));
    };
    const post = (payload: string, type = 'application/json') =>
      l.app.inject({ method: 'POST', url: '/v1/events', headers: { 'content-type': type }, payload });
    expect(sized(CONNECTOR_EVENT_BODY_LIMIT)).toHaveLength(65_536);
    expect((await post(sized(CONNECTOR_EVENT_BODY_LIMIT))).statusCode).toBe(202);
    const over = await post(sized(CONNECTOR_EVENT_BODY_LIMIT + 1));
    expect([over.statusCode, over.json<{ code: string }>().code]).toEqual([413, 'body_too_large']);
    const text = await post(JSON.stringify(transactionBody()), 'text/plain');
    expect([text.statusCode, text.json<{ code: string }>().code]).toEqual([415, 'unsupported_media_type']);
    expect(l.outcomes).toEqual(['recorded', 'invalid', 'invalid']);
  });
});

describe('connector listener: 400 with the problems, never recorded', () => {
  async function refused(payload: unknown): Promise<{ res: LightMyRequestResponse; problems: unknown; l: ListenerFixture }> {
    const l = await listener({ listen: false });
    const res = await l.app.inject({ method: 'POST', url: '/v1/events', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(payload) });
    expect(res.statusCode, res.body).toBe(400);
    const body = res.json<{ code: string; problems: unknown; details: { fields: unknown } }>();
    expect(body.code).toBe('validation_failed');
    expect(body.details.fields).toEqual(body.problems);
    expect(l.drafts).toEqual([]);
    expect(l.outcomes).toEqual(['invalid']);
    return { res, problems: body.problems, l };
  }

  it('a type the connector may not send', async () => {
    const { problems } = await refused(transactionBody(undefined, {}, { type: 'card.created' }));
    expect(problems).toEqual([
      {
        path: 'type',
        message: 'must be one of ["card.status_changed","transaction.authorized","transaction.declined","transaction.cleared","transaction.reversed"]',
      },
    ]);
  });

  it('a member the contract does not have, at the top and in data', async () => {
    expect((await refused(transactionBody(undefined, {}, { extra: 1 }))).problems).toEqual([{ path: 'extra', message: 'is not a known field' }]);
    expect((await refused(transactionBody(undefined, { note: 'x' }))).problems).toEqual([{ path: 'data.note', message: 'is not a known field' }]);
  });

  it('a merchant category code that is not 4 digits', async () => {
    const { problems } = await refused(transactionBody(undefined, { merchant: { name: 'Shop', categoryCode: '58140', country: 'PT' } }));
    expect(problems).toEqual([{ path: 'data.merchant.categoryCode', message: 'must match pattern "^[0-9]{4}$"' }]);
  });

  it('a decline without its reason', async () => {
    const body = transactionBody('transaction.declined');
    delete (body['data'] as Record<string, unknown>)['declineReason'];
    expect((await refused(body)).problems).toEqual([{ path: 'data.declineReason', message: 'is required' }]);
  });

  it('a card number in the merchant name: refused, and not repeated in the answer', async () => {
    const { problems, res } = await refused(transactionBody(undefined, { merchant: { name: `Shop ${FULL_PAN}`, categoryCode: '5814', country: 'PT' } }));
    expect(problems).toEqual([{ path: 'data.merchant.name', message: 'looks like a card number' }]);
    expect(res.body).not.toContain(FULL_PAN);
  });

  it('a card number as a metadata name: the path that names it is masked, in the answer and the log', async () => {
    const { problems, res, l } = await refused(statusChangedBody({ card: connectorRecord({ metadata: { [FULL_PAN]: 'x' } }) }));
    expect(problems).toEqual([{ path: 'data.card.metadata[************1111]', message: 'has a name that looks like a card number' }]);
    expect(res.body).not.toContain(FULL_PAN);
    expect(l.logs.text()).toContain('************1111');
    expect(l.logs.text()).not.toContain(FULL_PAN);
  });

  it('an issuing account the gateway does not serve', async () => {
    expect((await refused(transactionBody(undefined, {}, { issuingAccount: 'acct-zz' }))).problems).toEqual([
      { path: 'issuingAccount', message: 'is not an issuing account of this gateway' },
    ]);
  });

  it('not an object at all', async () => {
    expect((await refused([transactionBody()])).problems).toEqual([{ path: '(body)', message: 'must be object' }]);
  });

  it('strict JSON: a member twice, an integer written as a fraction', async () => {
    const l = await listener({ listen: false });
    const text = JSON.stringify(transactionBody());
    const post = (payload: string) => l.app.inject({ method: 'POST', url: '/v1/events', headers: { 'content-type': 'application/json' }, payload });
    const twice = await post(text.replace('"amount":1250', '"amount":1250,"amount":1'));
    expect(twice.json<{ problems: unknown }>().problems).toEqual([{ path: 'data.amount', message: 'appears more than once' }]);
    const fraction = await post(text.replace('"amount":1250', '"amount":1250.0'));
    expect(fraction.json<{ problems: unknown }>().problems).toEqual([{ path: 'data.amount', message: 'must be a JSON integer (no fraction or exponent)' }]);
    expect([twice.statusCode, fraction.statusCode, l.drafts.length]).toEqual([400, 400, 0]);
  });
});
