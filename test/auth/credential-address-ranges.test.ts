import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import { PASSWORD, createTestGateway, login, type TestGateway } from '../support/gateway-fixture.js';
import { RELAXED_LIMITS, T0, expectEnvelope, getWhoami, postLogin, whoamiRoute } from '../support/auth-requests.js';

const OUTSIDE = 'Client address is not registered for this credential';

/** D10: the `ranged` credential (10.9.0.0/16) is usable only from its registered range. */
describe('credential address ranges (D10)', () => {
  let gw: TestGateway;

  beforeAll(async () => {
    gw = await createTestGateway({ clock: new ManualClock(T0), overrides: { rateLimits: RELAXED_LIMITS }, extend: whoamiRoute });
  });

  afterAll(async () => {
    await gw.close();
  });

  const from = (address: string) => ({ 'x-forwarded-for': address });

  it('lets the credential log in from inside its range, reported by the trusted proxy', async () => {
    expect((await postLogin(gw, 'ranged', PASSWORD, from('10.9.1.1'))).statusCode).toBe(200);
    // an IPv4-mapped IPv6 spelling of the same address is the same address
    expect((await postLogin(gw, 'ranged', PASSWORD, from('::ffff:10.9.1.1'))).statusCode).toBe(200);
  });

  it('refuses a login from outside the range as a failed login, before the password is checked (D27)', async () => {
    const response = await postLogin(gw, 'ranged', PASSWORD, from('10.8.0.1'));
    expectEnvelope(response, 401, 'Authentication failed');
    const denied = gw.audit.events().find((event) => event.correlationId === response.headers['x-correlation-id']);
    expect(denied).toMatchObject({ event: 'login.failed', credential: 'cred-ranged', clientAddress: '10.8.0.1', outcome: 'failure', reason: 'address' });
    // the proxy's own address is outside too
    expectEnvelope(await postLogin(gw, 'ranged', PASSWORD), 401, 'Authentication failed');
  });

  it('believes only the address the trusted proxy appended, not one the client wrote before it', async () => {
    expectEnvelope(await postLogin(gw, 'ranged', PASSWORD, from('10.9.1.1, 10.8.0.1')), 401, 'Authentication failed');
  });

  it("refuses the credential's access token when used from outside the range", async () => {
    const session = await login(gw, 'ranged', PASSWORD, from('10.9.1.1'));
    expect((await getWhoami(gw, session.accessToken, from('10.9.200.3'))).json()).toEqual({ credential: 'cred-ranged' });
    expectEnvelope(await getWhoami(gw, session.accessToken, from('10.8.0.1')), 403, OUTSIDE);
  });

  it('does not restrict credentials without registered ranges', async () => {
    expect((await postLogin(gw, 'full', PASSWORD, from('10.8.0.1'))).statusCode).toBe(200);
  });
});
