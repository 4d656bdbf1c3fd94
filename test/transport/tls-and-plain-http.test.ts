import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { listenGateway, type RunningGateway } from '../../src/server.js';
import { createTestGateway, PASSWORD, testCertificatePem, type RawConfig, type TestGateway } from '../support/gateway-fixture.js';
import { parseHttpAnswer, rawExchange, realRequest, type RealResponse } from './real-clients.js';

/**
 * D9 and D10 over real sockets: TLS works, plain HTTP is refused without reading the body,
 * plain bytes on the TLS port never get an answer, and X-Forwarded-For / X-Forwarded-Proto
 * are believed only from configured trusted proxies.
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const JWKS = '/.well-known/jwks.json';

interface Started {
  gw: TestGateway;
  running: RunningGateway;
}

describe('TLS and plain HTTP on real listeners', () => {
  let ca: string;
  const opened: Started[] = [];

  beforeAll(async () => {
    ca = await testCertificatePem();
  });
  afterEach(async () => {
    for (const { gw, running } of opened.splice(0)) {
      await running.close();
      await gw.close();
    }
  });

  async function start(overrides: RawConfig = {}): Promise<Started> {
    const gw = await createTestGateway({ overrides });
    const running = await listenGateway(gw.gateway, {
      https: { host: '127.0.0.1', port: 0 },
      plainHttp: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
    });
    const started = { gw, running };
    opened.push(started);
    return started;
  }

  const https = (s: Started, path: string, options: Parameters<typeof realRequest>[1] = {}) => realRequest(`${s.running.httpsUrl}${path}`, { ca, ...options });
  const plain = (s: Started, path: string, options: Parameters<typeof realRequest>[1] = {}) => realRequest(`${s.running.plainUrl}${path}`, options);
  /** Refusals are audited in per-minute summaries (D25): write them now and return the newest. */
  const lastDenial = (s: Started) => {
    s.gw.gateway.flushAudit();
    return s.gw.audit
      .events()
      .filter((event) => event.event === 'access.denied')
      .at(-1);
  };

  function expectRefusal(response: RealResponse, message: string): void {
    expect(response.status).toBe(403);
    const body = JSON.parse(response.body) as { correlationId: string; status: number; message: string; details: object; timestamp: string };
    expect(body.status).toBe(403);
    expect(body.message).toBe(message);
    expect(body.details).toEqual({});
    expect(body.correlationId).toMatch(UUID);
    expect(response.headers['x-correlation-id']).toBe(body.correlationId);
  }

  it('serves a login over TLS', async () => {
    const s = await start();
    const response = await https(s, '/api/v1/auth/login', { method: 'POST', body: JSON.stringify({ username: 'full', password: PASSWORD }) });
    expect(response.status).toBe(200);
    expect(JSON.parse(response.body)).toMatchObject({ accessToken: expect.any(String), refreshToken: expect.any(String), idToken: expect.any(String) });
    expect(response.headers['x-correlation-id']).toMatch(UUID);
  });

  it('answers plain HTTP with 403 "HTTPS is required" and closes the connection', async () => {
    const s = await start();
    const response = await plain(s, JWKS);
    expectRefusal(response, 'HTTPS is required');
    expect(response.headers['connection']).toBe('close');
    expect(response.headers['location']).toBeUndefined();
  });

  it('refuses a plain POST without reading its body', async () => {
    const s = await start();
    const login = JSON.stringify({ username: 'full', password: PASSWORD });
    const withBody = await plain(s, '/api/v1/auth/login', { method: 'POST', body: login });
    expectRefusal(withBody, 'HTTPS is required');
    expect(withBody.headers['connection']).toBe('close');
    // A body announced as 1 MB but never sent: the answer comes anyway, so it was not awaited.
    const head = `POST /api/v1/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n{"username":`;
    const { received, closedByServer } = await rawExchange(s.running.plainUrl!, head);
    expect(closedByServer).toBe(true);
    const raw = parseHttpAnswer(received);
    expect(raw.statusCode).toBe(403);
    expect(raw.headers['connection']).toBe('close');
    expect(JSON.parse(raw.body)).toMatchObject({ status: 403, message: 'HTTPS is required' });
    // Nothing reached the login route.
    expect(s.gw.audit.events().filter((event) => event.event.startsWith('login.'))).toEqual([]);
  });

  it('gives plain HTTP bytes on the TLS port no HTTP answer and closes the socket', async () => {
    const s = await start();
    const { received, closedByServer } = await rawExchange(s.running.httpsUrl, `GET ${JWKS} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    expect(closedByServer).toBe(true);
    expect(received.toString('latin1')).not.toMatch(/HTTP\/1\.[01] \d{3}/);
  });

  describe('without trusted proxies', () => {
    it('does not believe X-Forwarded-Proto on the plain listener', async () => {
      const s = await start({ trustedProxies: [] });
      const response = await plain(s, JWKS, { headers: { 'x-forwarded-proto': 'https' } });
      expectRefusal(response, 'HTTPS is required');
    });

    it('ignores a spoofed X-Forwarded-For that names an allowed address', async () => {
      const s = await start({ trustedProxies: [], allowlist: ['10.0.0.0/8'] });
      const response = await https(s, JWKS, { headers: { 'x-forwarded-for': '10.0.0.1' } });
      expectRefusal(response, 'Client address is not allowed');
      expect(lastDenial(s)).toMatchObject({ event: 'access.denied', clientAddress: '127.0.0.1', reason: 'address_not_allowed' });
    });

    it('ignores a spoofed X-Forwarded-For that names a refused address', async () => {
      const s = await start({ trustedProxies: [], allowlist: ['127.0.0.0/8'] });
      const response = await https(s, JWKS, { headers: { 'x-forwarded-for': '192.0.2.99' } });
      expect(response.status).toBe(200);
    });
  });

  describe('behind a trusted proxy (127.0.0.1/32)', () => {
    it('believes X-Forwarded-Proto: https on the plain listener', async () => {
      const s = await start({ trustedProxies: ['127.0.0.1/32'] });
      const response = await plain(s, '/api/v1/auth/login', {
        method: 'POST',
        headers: { 'x-forwarded-proto': 'https' },
        body: JSON.stringify({ username: 'full', password: PASSWORD }),
      });
      expect(response.status).toBe(200);
      expect(JSON.parse(response.body)).toMatchObject({ accessToken: expect.any(String) });
    });

    it('still refuses the plain listener when the proxy reports http', async () => {
      const s = await start({ trustedProxies: ['127.0.0.1/32'] });
      expectRefusal(await plain(s, JWKS, { headers: { 'x-forwarded-proto': 'http' } }), 'HTTPS is required');
      expectRefusal(await plain(s, JWKS), 'HTTPS is required');
    });

    it('takes the client address from X-Forwarded-For', async () => {
      const s = await start({ trustedProxies: ['127.0.0.1/32'], allowlist: ['10.0.0.0/8'] });
      expect((await https(s, JWKS, { headers: { 'x-forwarded-for': '10.0.0.1' } })).status).toBe(200);
      expectRefusal(await https(s, JWKS, { headers: { 'x-forwarded-for': '192.0.2.7' } }), 'Client address is not allowed');
      expect(lastDenial(s)).toMatchObject({ event: 'access.denied', clientAddress: '192.0.2.7' });
      // The proxy's own address is not on this allowlist.
      expectRefusal(await https(s, JWKS), 'Client address is not allowed');
    });

    it('takes the rightmost untrusted entry: a client-written leftmost entry is ignored', async () => {
      const s = await start({ trustedProxies: ['127.0.0.1/32'], allowlist: ['10.0.0.0/8'] });
      expectRefusal(await https(s, JWKS, { headers: { 'x-forwarded-for': '10.0.0.1, 192.0.2.7' } }), 'Client address is not allowed');
      expect(lastDenial(s)).toMatchObject({ clientAddress: '192.0.2.7' });
      expect((await https(s, JWKS, { headers: { 'x-forwarded-for': '192.0.2.7, 10.0.0.1' } })).status).toBe(200);
    });

    it('normalises an IPv4-mapped forwarded address before the allowlist', async () => {
      const s = await start({ trustedProxies: ['127.0.0.1/32'], allowlist: ['10.0.0.0/8'] });
      expect((await https(s, JWKS, { headers: { 'x-forwarded-for': '::ffff:10.1.2.3' } })).status).toBe(200);
      expectRefusal(await https(s, JWKS, { headers: { 'x-forwarded-for': '::ffff:192.0.2.1' } }), 'Client address is not allowed');
      expect(lastDenial(s)).toMatchObject({ clientAddress: '192.0.2.1' });
    });
  });
});
