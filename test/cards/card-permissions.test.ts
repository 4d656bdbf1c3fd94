import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricValue } from '../support/auth-requests.js';
import { connectorStats, createCard, expectCard, expectError, startCardFixture, validCardBody, type CardFixture } from '../support/card-fixture.js';

/**
 * D13 and spec 5.7: 401 before anything else (the body is not even read), 403 for a missing
 * permission with nothing forwarded or created; and the connector contract's headers: the
 * client's Authorization never goes upstream.
 */

let fixture: CardFixture;

beforeAll(async () => {
  fixture = await startCardFixture();
});
afterAll(async () => {
  await fixture.close();
});

const stats = () => connectorStats(fixture.connector);
/** The refusal summaries (D60) of the window that began with this request: flushed first, so the window is closed. */
const deniedEvents = (correlationId: string | string[] | undefined) => {
  fixture.gw.gateway.flushAudit();
  return fixture.gw.audit.lines
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((event) => event['event'] === 'card.refused' && event['correlationId'] === correlationId);
};

describe('403 without the needed permission (D13)', () => {
  it('no-perms gets 403, audited in the per-credential refusal summary (D60), and the connector sees nothing', async () => {
    fixture.gw.gateway.flushAudit();
    const before = await stats();
    const response = await createCard(fixture.gw, await fixture.token('no-perms'), validCardBody());
    const body = expectError(response, 403, 'Permission cards:create is required');
    expect(body.details).toEqual({});
    expect(deniedEvents(body.correlationId)).toEqual([
      expect.objectContaining({ credential: 'cred-none', reason: 'permission_denied', outcome: 'denied', route: 'POST /api/v1/issuing/cards', count: 1 }),
    ]);
    const after = await stats();
    expect(after.requestsReceived).toBe(before.requestsReceived);
    expect(after.cardsCreated).toBe(before.cardsCreated);
  });

  it('no-perms is refused before the body is read (a malformed body still gets 403)', async () => {
    expectError(await createCard(fixture.gw, await fixture.token('no-perms'), '{"requestId":'), 403, 'Permission cards:create is required');
  });

  it('create-only with revealDetails=true gets 403 and no card is created, not even a reservation', async () => {
    const token = await fixture.token('create-only');
    fixture.gw.gateway.flushAudit();
    const deniedBefore = await metricValue(fixture.gw, 'gateway_access_denied_total', { reason: 'permission_denied' });
    const before = await stats();
    const body = validCardBody();
    const response = await createCard(fixture.gw, token, body, 'revealDetails=true');
    const error = expectError(response, 403, 'Permission cards:reveal is required for revealDetails=true');
    expect(deniedEvents(error.correlationId)).toEqual([expect.objectContaining({ credential: 'cred-create', reason: 'permission_denied' })]);
    expect(await metricValue(fixture.gw, 'gateway_access_denied_total', { reason: 'permission_denied' })).toBe(deniedBefore + 1);
    const after = await stats();
    expect(after.requestsReceived).toBe(before.requestsReceived);
    expect(after.cardsCreated).toBe(before.cardsCreated);

    // The refused request left nothing behind: the same requestId now creates (not replays) a card.
    const created = await createCard(fixture.gw, token, body);
    const card = expectCard(created);
    expect(created.headers['idempotent-replayed']).toBeUndefined();
    expect(card.pan).toMatch(/^\*{12}\d{4}$/);
    expect(card.cvc).toBe('***');
  });

  it('create-only may ask for revealDetails=false', async () => {
    const card = expectCard(await createCard(fixture.gw, await fixture.token('create-only'), validCardBody(), 'revealDetails=false'));
    expect(card.cvc).toBe('***');
  });
});

describe('401 before anything else (spec 5.3)', () => {
  it('without a token: 401 with details {}, and nothing forwarded', async () => {
    const before = await stats();
    const body = expectError(await createCard(fixture.gw, undefined, validCardBody()), 401, 'Authorization header is missing');
    expect(body.details).toEqual({});
    expect((await stats()).requestsReceived).toBe(before.requestsReceived);
  });

  it('a malformed body without a token gets 401, not 400 (the body is not read)', async () => {
    expectError(await createCard(fixture.gw, undefined, '{"requestId":'), 401, 'Authorization header is missing');
  });

  it('a wrong-content-type body without a token gets 401, not 415', async () => {
    expectError(await createCard(fixture.gw, undefined, 'plain', undefined, { 'content-type': 'text/plain' }), 401, 'Authorization header is missing');
  });

  it('another scheme, or a token that is not a JWT, gets 401', async () => {
    const token = await fixture.token('full');
    expectError(
      await createCard(fixture.gw, undefined, validCardBody(), undefined, { authorization: `Token ${token}` }),
      401,
      'Authorization header must be "Bearer <token>"',
    );
    expectError(await createCard(fixture.gw, 'not-a-jwt', validCardBody()), 401, 'Authorization header must be "Bearer <token>"');
  });
});

describe('what reaches the connector (connector contract)', () => {
  it('never the client Authorization header; the Idempotency-Key and the response correlation id', async () => {
    const token = await fixture.token('full');
    const requestId = '0D1F2E3C-4B5A-4968-8776-A5B4C3D2E1F0';
    const response = await createCard(fixture.gw, token, validCardBody({ requestId }), undefined, {
      cookie: 'session=abc',
      'x-api-key': 'client-key',
      'x-correlation-id': 'client-chosen',
    });
    expectCard(response);
    const { lastHeaders, lastBody } = await stats();
    expect(lastHeaders).not.toBeNull();
    const headers = lastHeaders ?? {};
    expect(headers['authorization']).toBeUndefined();
    expect(headers['cookie']).toBeUndefined();
    expect(headers['x-api-key']).toBeUndefined();
    expect(headers['idempotency-key']).toBe(`acct-eu:${requestId.toLowerCase()}`);
    const correlationId = response.headers['x-correlation-id'];
    expect(correlationId).toMatch(/^[0-9a-f-]{36}$/);
    expect(headers['x-correlation-id']).toBe(correlationId);
    expect(headers['content-type']).toBe('application/json');
    // No trace of the token anywhere in what the connector received.
    expect(JSON.stringify({ headers, lastBody })).not.toContain(token);
    expect(JSON.stringify(headers)).not.toContain(token.split('.')[2] ?? token);
  });
});
