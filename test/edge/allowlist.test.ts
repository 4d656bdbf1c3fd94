import { afterEach, describe, expect, it } from 'vitest';
import { createTestGateway, testConfig, type TestGateway } from '../support/gateway-fixture.js';

/**
 * D10: the environment allowlist decides before anything else runs, for IPv4, IPv6 and
 * IPv4-mapped IPv6 client addresses, whether the address is the socket's or a trusted proxy's.
 */

const JWKS = '/.well-known/jwks.json';

describe('environment allowlist (D10)', () => {
  let gw: TestGateway | undefined;
  afterEach(async () => {
    await gw?.close();
    gw = undefined;
  });

  /**
   * inject() cannot speak TLS, so its `X-Forwarded-Proto: https` must come from a trusted peer.
   * Unless a test is about proxies, every peer is trusted and sends no X-Forwarded-For: the
   * client address is then the socket address. (Real sockets: test/transport.)
   */
  const EVERY_PEER = ['0.0.0.0/0', '::/0'];

  async function start(overrides: Record<string, unknown> = {}): Promise<TestGateway> {
    gw = await createTestGateway({ overrides: { trustedProxies: EVERY_PEER, ...overrides } });
    return gw;
  }

  /** A request whose socket address is `remoteAddress`. */
  const from = (g: TestGateway, remoteAddress: string, url = JWKS) => g.inject({ method: 'GET', url, remoteAddress });

  async function expectDenied(g: TestGateway, remoteAddress: string): Promise<void> {
    const response = await from(g, remoteAddress);
    expect(response.statusCode, remoteAddress).toBe(403);
    const body = response.json<{ status: number; message: string; correlationId: string; details: object }>();
    expect(body.status).toBe(403);
    expect(body.message).toBe('Client address is not allowed');
    expect(body.details).toEqual({});
    expect(body.correlationId).toBe(response.headers['x-correlation-id']);
  }

  /** Refusals are audited in per-minute summaries (D25): write them now and return the newest. */
  function lastDenial(g: TestGateway) {
    g.gateway.flushAudit();
    return g.audit
      .events()
      .filter((event) => event.event === 'access.denied')
      .at(-1);
  }

  async function expectAllowed(g: TestGateway, remoteAddress: string): Promise<void> {
    const response = await from(g, remoteAddress);
    expect(response.statusCode, remoteAddress).toBe(200);
  }

  it('admits a listed IPv4 address and refuses an unlisted one', async () => {
    const g = await start();
    await expectAllowed(g, '10.1.2.3');
    await expectDenied(g, '192.0.2.1');
  });

  it('admits a listed IPv6 address and refuses an unlisted one', async () => {
    const g = await start();
    await expectAllowed(g, '2001:db8:1234::1');
    await expectAllowed(g, '::1');
    await expectDenied(g, '2001:db9::1');
    await expectDenied(g, '::2');
  });

  it('matches IPv4-mapped IPv6 addresses against the IPv4 ranges', async () => {
    const g = await start();
    await expectAllowed(g, '::ffff:10.1.2.3');
    await expectDenied(g, '::ffff:192.0.2.1');
    // The audit shows the unwrapped spelling, so limiters and logs see one address.
    expect(lastDenial(g)?.clientAddress).toBe('192.0.2.1');
  });

  it('normalises a mapped address before matching, so an IPv6 range cannot admit it', async () => {
    const g = await start({ allowlist: ['::/0', '127.0.0.1/32'] });
    await expectAllowed(g, '2001:db8::1');
    await expectDenied(g, '::ffff:192.0.2.1');
  });

  it('unwraps IPv4-mapped allowlist entries so they match both spellings', async () => {
    const g = await start({ allowlist: ['::ffff:198.51.100.0/120', '127.0.0.1/32'] });
    await expectAllowed(g, '198.51.100.5');
    await expectAllowed(g, '::ffff:198.51.100.5');
    await expectDenied(g, '198.51.101.5');
  });

  it('admits both ends of a CIDR and refuses the addresses just outside it', async () => {
    const g = await start({ allowlist: ['127.0.0.1/32', '198.51.100.16/28', '2001:db8:100::/48'] });
    await expectAllowed(g, '198.51.100.16');
    await expectAllowed(g, '198.51.100.31');
    await expectDenied(g, '198.51.100.15');
    await expectDenied(g, '198.51.100.32');
    await expectAllowed(g, '2001:db8:100::');
    await expectAllowed(g, '2001:db8:100:ffff:ffff:ffff:ffff:ffff');
    await expectDenied(g, '2001:db8:ff:ffff:ffff:ffff:ffff:ffff');
    await expectDenied(g, '2001:db8:101::');
  });

  it('counts each denial and audits one summary line per source address and minute (D25)', async () => {
    const g = await start();
    const first = await from(g, '192.0.2.1');
    expect(first.statusCode).toBe(403);
    await from(g, '192.0.2.1');
    await from(g, '192.0.2.2');
    // Nothing is written per request.
    expect(g.audit.events().filter((event) => event.event === 'access.denied')).toHaveLength(0);
    g.gateway.flushAudit();
    const events = g.audit.events().filter((event) => event.event === 'access.denied');
    expect(events).toHaveLength(2);
    expect(events[0]).toMatchObject({
      event: 'access.denied',
      correlationId: first.headers['x-correlation-id'],
      clientAddress: '192.0.2.1',
      outcome: 'denied',
      reason: 'address_not_allowed',
      count: 2,
    });
    expect(events[1]).toMatchObject({ clientAddress: '192.0.2.2', count: 1 });
    expect(await g.gateway.metrics.registry.getSingleMetricAsString('gateway_access_denied_total')).toContain(
      'gateway_access_denied_total{reason="address_not_allowed"} 3',
    );
  });

  it('refuses before the body is parsed or the route runs', async () => {
    const g = await start();
    const malformed = await g.inject({
      method: 'POST',
      url: '/api/v1/auth/login',
      remoteAddress: '192.0.2.1',
      headers: { 'content-type': 'application/json' },
      payload: '{"username": ',
    });
    expect(malformed.statusCode).toBe(403);
    expect(malformed.json<{ message: string }>().message).toBe('Client address is not allowed');
    const notJson = await g.inject({
      method: 'POST',
      url: '/api/v1/auth/login',
      remoteAddress: '192.0.2.1',
      headers: { 'content-type': 'text/plain' },
      payload: 'x',
    });
    expect(notJson.statusCode).toBe(403);
    const unknownPath = await g.inject({ method: 'GET', url: '/no/such/path', remoteAddress: '192.0.2.1' });
    expect(unknownPath.statusCode).toBe(403);
    // The login route never ran: no login was attempted, counted or audited.
    g.gateway.flushAudit();
    expect(g.audit.events().map((event) => [event.event, event.count])).toEqual([['access.denied', 3]]);
    expect(await g.gateway.metrics.registry.getSingleMetricAsString('gateway_logins_total')).not.toMatch(/gateway_logins_total\{[^}]*\} [1-9]/);
  });

  it('uses the address a trusted proxy reports in X-Forwarded-For', async () => {
    const g = await start({ allowlist: ['10.0.0.0/8'], trustedProxies: ['127.0.0.1/32'] });
    // inject() connects from 127.0.0.1, which the test config trusts as a proxy.
    const allowed = await g.inject({ method: 'GET', url: JWKS, headers: { 'x-forwarded-for': '10.4.5.6' } });
    expect(allowed.statusCode).toBe(200);
    const denied = await g.inject({ method: 'GET', url: JWKS, headers: { 'x-forwarded-for': '192.0.2.44' } });
    expect(denied.statusCode).toBe(403);
    expect(lastDenial(g)?.clientAddress).toBe('192.0.2.44');
    const mapped = await g.inject({ method: 'GET', url: JWKS, headers: { 'x-forwarded-for': '::ffff:10.9.9.9' } });
    expect(mapped.statusCode).toBe(200);
    // The proxy itself is not on the allowlist: without a forwarded address it is refused.
    const proxyItself = await g.inject({ method: 'GET', url: JWKS });
    expect(proxyItself.statusCode).toBe(403);
  });

  it('takes the rightmost untrusted X-Forwarded-For entry, not the client-written leftmost one', async () => {
    const g = await start({ allowlist: ['10.0.0.0/8'], trustedProxies: ['127.0.0.1/32'] });
    const spoofedLeft = await g.inject({ method: 'GET', url: JWKS, headers: { 'x-forwarded-for': '10.0.0.1, 192.0.2.7' } });
    expect(spoofedLeft.statusCode).toBe(403);
    expect(lastDenial(g)?.clientAddress).toBe('192.0.2.7');
    const realLeft = await g.inject({ method: 'GET', url: JWKS, headers: { 'x-forwarded-for': '192.0.2.7, 10.0.0.1' } });
    expect(realLeft.statusCode).toBe(200);
  });

  it('ignores X-Forwarded-For from a peer that is not a trusted proxy', async () => {
    const g = await start({ allowlist: ['10.0.0.0/8', '198.51.100.0/24'], trustedProxies: ['127.0.0.1/32'] });
    const spoofed = await g.inject({ method: 'GET', url: JWKS, remoteAddress: '192.0.2.7', headers: { 'x-forwarded-for': '10.0.0.1' } });
    expect(spoofed.statusCode).toBe(403);
    expect(lastDenial(g)?.clientAddress).toBe('192.0.2.7');
    // And the reverse: an allowed peer cannot make itself look like another address.
    const allowedPeer = await g.inject({
      method: 'GET',
      url: JWKS,
      remoteAddress: '198.51.100.9',
      headers: { 'x-forwarded-for': '192.0.2.7', 'x-forwarded-proto': 'https' },
    });
    // 198.51.100.9 is allowed but untrusted: XFF ignored, X-Forwarded-Proto ignored too -> plain HTTP.
    expect(allowedPeer.statusCode).toBe(403);
    expect(allowedPeer.json<{ message: string }>().message).toBe('HTTPS is required');
  });

  it('applies a reloaded allowlist to the next request without a restart', async () => {
    const g = await start();
    await expectAllowed(g, '10.1.2.3');
    await expectDenied(g, '198.51.100.7');
    g.gateway.reload(await testConfig({ allowlist: ['127.0.0.0/8', '198.51.100.0/24'], trustedProxies: EVERY_PEER }));
    await expectDenied(g, '10.1.2.3');
    await expectAllowed(g, '198.51.100.7');
  });

  it('applies reloaded trusted proxies to the next request', async () => {
    const g = await start({ allowlist: ['10.0.0.0/8', '127.0.0.0/8'], trustedProxies: ['127.0.0.1/32'] });
    const viaProxy = () => g.inject({ method: 'GET', url: JWKS, remoteAddress: '10.20.0.5', headers: { 'x-forwarded-for': '192.0.2.7' } });
    // 10.20.0.5 is not trusted yet: its XFF is ignored, and its X-Forwarded-Proto too.
    const before = await viaProxy();
    expect(before.statusCode).toBe(403);
    expect(before.json<{ message: string }>().message).toBe('HTTPS is required');
    g.gateway.reload(await testConfig({ allowlist: ['10.0.0.0/8', '127.0.0.0/8'], trustedProxies: ['127.0.0.1/32', '10.20.0.0/16'] }));
    const after = await viaProxy();
    expect(after.statusCode).toBe(403);
    expect(after.json<{ message: string }>().message).toBe('Client address is not allowed');
    expect(lastDenial(g)?.clientAddress).toBe('192.0.2.7');
  });
});
