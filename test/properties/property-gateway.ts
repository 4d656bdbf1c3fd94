import { afterAll, beforeAll } from 'vitest';
import type { RunningSandboxConnector, SandboxStats } from '../../src/connector/sandbox/sandbox-connector.js';
import { startCardFixture } from '../support/card-fixture.js';
import { login, type TestGateway } from '../support/gateway-fixture.js';

/**
 * The set-up the inject-level property suites share: a sandbox connector, a gateway forwarding
 * to it with limits no property case can reach, one logged-in session, and the connector's own
 * request counter (to prove a refused request reached nothing).
 */

export { LOGIN, LOGOUT, REFRESH } from '../support/auth-requests.js';
export { CARDS } from '../support/card-fixture.js';
export { UUID } from '../support/envelope.js';
export const JWKS = '/.well-known/jwks.json';

/** The properties are about input, not limits: no case may be cut short by a 429. */
const UNREACHABLE_LIMITS = {
  login: { points: 1_000_000, windowSeconds: 60 },
  refresh: { points: 1_000_000, windowSeconds: 60 },
  loginLockout: { maxConsecutiveFailures: 1_000_000, lockoutSeconds: 1 },
};

export interface PropertyGateway {
  gw: TestGateway;
  connector: RunningSandboxConnector;
  /** The session of `full`, logged in through the real route. */
  accessToken: string;
  refreshToken: string;
  /** The connector's counters and the requests it saw. */
  connectorStats(): Promise<SandboxStats>;
  /** How many requests the connector has received so far. */
  received(): Promise<number>;
  close(): Promise<void>;
}

export async function startPropertyGateway(): Promise<PropertyGateway> {
  const fixture = await startCardFixture({ overrides: { rateLimits: UNREACHABLE_LIMITS } });
  try {
    const { gw, connector } = fixture;
    const { accessToken, refreshToken } = await login(gw);
    const connectorStats = async (): Promise<SandboxStats> => (await connector.app.inject({ method: 'GET', url: '/__control/stats' })).json<SandboxStats>();
    return {
      gw,
      connector,
      accessToken,
      refreshToken,
      connectorStats,
      received: async () => (await connectorStats()).requestsReceived,
      close: () => fixture.close(),
    };
  } catch (error) {
    await fixture.close();
    throw error;
  }
}

/**
 * A property gateway for the enclosing suite: started in its beforeAll, closed in its afterAll.
 * Read its members inside tests, hooks and generators' callbacks (not while the suite is collected).
 */
export function propertyGatewayForSuite(): PropertyGateway {
  let started: PropertyGateway | undefined;
  beforeAll(async () => {
    started = await startPropertyGateway();
  });
  afterAll(async () => {
    await started?.close();
  });
  const current = (): PropertyGateway => {
    if (!started) throw new Error('the property gateway is not started');
    return started;
  };
  return {
    get gw() {
      return current().gw;
    },
    get connector() {
      return current().connector;
    },
    get accessToken() {
      return current().accessToken;
    },
    get refreshToken() {
      return current().refreshToken;
    },
    connectorStats: () => current().connectorStats(),
    received: () => current().received(),
    close: () => current().close(),
  };
}
