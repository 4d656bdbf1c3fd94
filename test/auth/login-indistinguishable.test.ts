import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import { DEFAULT_CREDENTIALS, PASSWORD, createTestGateway, type TestGateway } from '../support/gateway-fixture.js';
import { RELAXED_LIMITS, T0, expectUnauthorized, postLogin } from '../support/auth-requests.js';

const median = (values: number[]): number => {
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};

/**
 * Spec 4.1 and the dummy-hash rule (passwords): an unknown username, a wrong password and an inactive
 * credential give the same answer, and an unknown username costs a real scrypt verification.
 */
describe('login failures that must look alike', () => {
  let gw: TestGateway;

  beforeAll(async () => {
    gw = await createTestGateway({ clock: new ManualClock(T0), overrides: { rateLimits: RELAXED_LIMITS } });
  });

  afterAll(async () => {
    await gw.close();
  });

  /** The body without the per-request fields. */
  const stable = (body: Record<string, unknown>) => ({ ...body, correlationId: undefined, timestamp: undefined });

  it('answers unknown username, wrong password and inactive credential with the same status, message and details', async () => {
    const unknown = await postLogin(gw, 'no-such-user', PASSWORD);
    const wrongPassword = await postLogin(gw, 'full', 'not the password');
    const inactive = await postLogin(gw, 'inactive', PASSWORD);
    expect(DEFAULT_CREDENTIALS.some((c) => c.username === 'inactive' && c.active === false)).toBe(true);
    for (const response of [unknown, wrongPassword, inactive]) expectUnauthorized(response, 'Authentication failed');

    const bodies = [unknown, wrongPassword, inactive].map((response) => stable(response.json()));
    expect(bodies[1]).toStrictEqual(bodies[0]);
    expect(bodies[2]).toStrictEqual(bodies[0]);
    // the same headers apart from the per-request ones
    const headerNames = (response: typeof unknown) =>
      Object.keys(response.headers)
        .filter((name) => !['date', 'x-correlation-id', 'ratelimit-remaining', 'ratelimit-reset'].includes(name))
        .sort();
    expect(headerNames(wrongPassword)).toEqual(headerNames(unknown));
    expect(wrongPassword.headers['content-length']).toBe(unknown.headers['content-length']);
  });

  it('spends a scrypt verification on an unknown username as on a wrong password (median of 5 each, loose bound)', async () => {
    // warm-up: first requests pay for JIT and route compilation
    await postLogin(gw, 'warm-up-user', 'x');
    await postLogin(gw, 'full', 'x');

    const unknown: number[] = [];
    const wrongPassword: number[] = [];
    for (let round = 0; round < 5; round += 1) {
      // interleaved, so that a slow moment of the machine hits both series alike
      let started = performance.now();
      expect((await postLogin(gw, `unknown-${round}`, 'some password')).statusCode).toBe(401);
      unknown.push(performance.now() - started);
      started = performance.now();
      expect((await postLogin(gw, 'create-only', `wrong password ${round}`)).statusCode).toBe(401);
      wrongPassword.push(performance.now() - started);
    }
    // Without the dummy hash an unknown user would answer in well under a millisecond of work.
    expect(median(unknown)).toBeGreaterThanOrEqual(0.5 * median(wrongPassword));
  });
});
