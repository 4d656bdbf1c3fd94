import { describe, expect, it } from 'vitest';
import {
  CARDS_PATH,
  clientAddress,
  publicCardBody,
  REPLAYED_REQUEST_ID,
  REQUEST_ID,
  requestIds,
  requestMaker,
  requestTemplate,
} from '../../bench/request-templates.js';
import { CardRequestSchema } from '../../src/cards/card-schemas.js';

/**
 * What the bench's load generators send (bench/request-templates.ts): card creation is
 * idempotent on its requestId, so a load that repeated one would measure replays. Every
 * request gets its own UUID-shaped id, in the body and in the headers that carry it.
 */

const uuidShaped = new RegExp(CardRequestSchema.properties.requestId.pattern!);

describe('requestIds', () => {
  it('are UUID-shaped as the card schema wants them, and never repeat', () => {
    const next = requestIds('0badcafe');
    const ids = Array.from({ length: 70_000 }, next);
    expect(ids.filter((id) => !uuidShaped.test(id))).toEqual([]);
    expect(new Set(ids).size).toBe(70_000);
    expect(ids[0]).toBe('0badcafe-0000-4000-8000-000000000001');
    expect(ids.at(-1)).toBe('0badcafe-0000-4000-8000-000000011170');
  });

  it('differ between two generators (their prefixes are drawn apart)', () => {
    const [a, b] = [requestIds(), requestIds()];
    expect(a()).not.toBe(b());
  });
});

describe('requestMaker', () => {
  it('puts each request its own id in the body and in the headers the template marks', () => {
    const next = requestMaker(requestTemplate('connector-create', '/v1/cards', {}), requestIds('00000001'));
    const first = next();
    const second = next();
    const id = '00000001-0000-4000-8000-000000000001';
    expect(first.headers['idempotency-key']).toBe(`acct-bench-eu:${id}`);
    expect(first.headers['x-correlation-id']).toBe(id);
    expect(JSON.parse(first.body!)).toMatchObject({ requestId: id, issuingAccount: 'acct-bench-eu' });
    expect(JSON.parse(second.body!).requestId).toBe('00000001-0000-4000-8000-000000000002');
    expect(JSON.stringify(first)).not.toContain(REQUEST_ID);
  });

  it('sends the gateway the public card body with the token, and turns over the client addresses one per request', () => {
    const next = requestMaker(requestTemplate('gateway-create', CARDS_PATH, { token: 'abc', clientAddresses: 3 }), requestIds('00000002'));
    const requests = Array.from({ length: 4 }, next);
    expect(requests[0]!.body).toBe(publicCardBody('00000002-0000-4000-8000-000000000001'));
    expect(requests[0]!.headers['authorization']).toBe('Bearer abc');
    expect(requests.map((r) => r.headers['x-forwarded-for'])).toEqual([clientAddress(1), clientAddress(2), clientAddress(0), clientAddress(1)]);
    expect(clientAddress(258)).toBe('10.100.1.2');
  });

  it('repeats one requestId for the replay scenario and sends no forwarded address without client addresses', () => {
    const next = requestMaker(requestTemplate('gateway-replay', CARDS_PATH, { token: 'abc' }));
    const [a, b] = [next(), next()];
    expect(a.body).toBe(b.body);
    expect(JSON.parse(a.body!).requestId).toBe(REPLAYED_REQUEST_ID);
    expect(a.headers['x-forwarded-for']).toBeUndefined();
  });
});
