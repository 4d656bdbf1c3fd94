import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenGateway, type RunningGateway } from '../../src/server.js';
import { createTestGateway, testCertificatePem, type TestGateway } from '../support/gateway-fixture.js';
import { realRequest } from '../transport/real-clients.js';
import { expectContractError } from './contract-helpers.js';

/**
 * Issue 9 row 12 (D10): over a real TLS listener, behind the trusted proxy 127.0.0.1, an
 * X-Forwarded-For that is not a four-part decimal IPv4 or a valid IPv6 address is not normalised
 * into an allowed one: `127.1`, `2130706433`, `0x7f.0.0.1` get 403 address_not_allowed with
 * Connection: close, while `127.0.0.1` itself passes.
 */

const JWKS = '/.well-known/jwks.json';

describe('strict forwarded addresses (D10)', () => {
  let gw: TestGateway;
  let running: RunningGateway;
  let ca: string;

  beforeAll(async () => {
    ca = await testCertificatePem();
    // Only loopback is allowed: every spelling below "means" 127.0.0.1 to a lenient parser.
    gw = await createTestGateway({ overrides: { trustedProxies: ['127.0.0.1/32'], allowlist: ['127.0.0.0/8'] } });
    running = await listenGateway(gw.gateway, { https: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 } });
  });
  afterAll(async () => {
    await running?.close();
    await gw?.close();
  });

  const fetchFrom = (forwarded: string) => realRequest(`${running.httpsUrl}${JWKS}`, { ca, headers: { 'x-forwarded-for': forwarded } });

  it('refuses 127.1, 2130706433, 0x7f.0.0.1 (and 127.0.1) from a trusted proxy with 403, while 127.0.0.1 passes', async () => {
    expect((await fetchFrom('127.0.0.1')).status).toBe(200);
    expect((await fetchFrom('::ffff:127.0.0.1')).status).toBe(200);
    for (const forwarded of ['127.1', '2130706433', '0x7f.0.0.1', '127.0.1']) {
      const response = await fetchFrom(forwarded);
      expect(response.status, `${forwarded}: ${response.body}`).toBe(403);
      expect(response.headers['connection'], forwarded).toBe('close');
      expectContractError(
        { statusCode: response.status, headers: response.headers, body: response.body },
        403,
        'address_not_allowed',
        'Client address is not allowed',
      );
    }
  });
});
