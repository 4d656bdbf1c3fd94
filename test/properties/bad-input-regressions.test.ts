import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenGateway, type RunningGateway } from '../../src/server.js';
import { createTestGateway, testCertificatePem, type TestGateway } from '../support/gateway-fixture.js';
import { mintToken } from '../support/card-fixture.js';
import { UUID } from '../support/envelope.js';
import { parseHttpAnswer, rawExchange } from '../transport/real-clients.js';

/** Cases bad-input.property.test.ts found, pinned as examples. */

function expectEnvelope(status: number, headers: Record<string, unknown>, body: string, message: string): void {
  const correlationId = headers['x-correlation-id'];
  expect(correlationId).toMatch(UUID);
  const envelope = JSON.parse(body) as Record<string, unknown>;
  expect(envelope).toMatchObject({ correlationId, status, message, details: {} });
  expect(new Date(String(envelope['timestamp'])).toISOString()).toBe(envelope['timestamp']);
  expect(body).not.toContain('FST_');
}

describe('regressions found by the bad-input properties', () => {
  let gw: TestGateway;
  let direct: TestGateway;
  let running: RunningGateway;

  beforeAll(async () => {
    gw = await createTestGateway();
    // No trusted proxy: the socket address and TLS decide, as for a client connecting directly.
    direct = await createTestGateway({ overrides: { trustedProxies: [], allowlist: ['10.0.0.0/8'] } });
    running = await listenGateway(direct.gateway, {
      https: { host: '127.0.0.1', port: 0 },
      plainHttp: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
    });
  });

  afterAll(async () => {
    await running?.close();
    await direct?.close();
    await gw?.close();
  });

  it("regression: a URL with a malformed percent-encoding gets the D20 envelope and an X-Correlation-Id, never Fastify's own body", async () => {
    for (const url of ['/api/v1/auth/login%', '/%zz', '/api/v1/issuing/cards%E0%A4%A', '/.well-known/jwks.json%']) {
      for (const method of ['GET', 'POST', 'DELETE'] as const) {
        const response = await gw.inject({ method, url });
        expect(response.statusCode, `${method} ${url}: ${response.body}`).toBe(400);
        expect(response.headers['content-type']).toMatch(/^application\/json/);
        expectEnvelope(400, response.headers, response.body, 'Request URL is malformed');
      }
    }
  });

  it('regression: a malformed URL from outside the allowlist is refused with 403 first, and over plain HTTP with 403 "HTTPS is required"', async () => {
    const ca = await testCertificatePem();
    const overTls = await rawExchange(running.httpsUrl, 'GET /%zz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n', { tls: { ca } });
    const fromOutside = parseHttpAnswer(overTls.received);
    expect(fromOutside.statusCode).toBe(403);
    expectEnvelope(
      403,
      fromOutside.headers,
      fromOutside.body.slice(fromOutside.body.indexOf('{'), fromOutside.body.lastIndexOf('}') + 1),
      'Client address is not allowed',
    );

    // The same gateway reloaded with 127.0.0.0/8 allowed: now plain HTTP is the reason.
    direct.gateway.reload({ ...direct.config, allowlist: gw.config.allowlist });
    const { received } = await rawExchange(running.plainUrl!, 'GET /%zz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
    const overPlain = parseHttpAnswer(received);
    expect(overPlain.statusCode).toBe(403);
    expectEnvelope(403, overPlain.headers, overPlain.body.slice(overPlain.body.indexOf('{'), overPlain.body.lastIndexOf('}') + 1), 'HTTPS is required');
  });

  it('regression: a PAN-like unknown key is never echoed in the validation details', async () => {
    const token = await mintToken(gw, 'full');
    const response = await gw.inject({
      method: 'POST',
      url: '/api/v1/issuing/cards',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      payload: JSON.stringify({ '4111111111111111': [], config: { '5500000000000004': 1 }, metadata: { '378282246310005': 7 } }),
    });
    expect(response.statusCode).toBe(400);
    expect(response.body).not.toMatch(/\d{13}/);
    const paths = response.json<{ details: { fields: { path: string }[] } }>().details.fields.map((field) => field.path);
    // still says where the problem is, with the digits masked as D18 masks a PAN
    expect(paths).toEqual(expect.arrayContaining(['[************1111]', 'config[************0004]', 'metadata[***********0005]']));
  });
});
