import type { LightMyRequestResponse } from 'fastify';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import { verifyPassword } from '../../src/foundation/password-hash.js';
import { PASSWORD, createTestGateway, type TestGateway } from '../support/gateway-fixture.js';
import { T0, postLogin } from '../support/auth-requests.js';
import { auditRecords, expectContractError, stableHeaders } from './contract-helpers.js';

/**
 * Issue 9 row 2 (D27): the `ranged` credential (10.9.0.0/16) with its correct password from
 * outside its ranges gets exactly the answer of a wrong password (401 "Authentication failed"),
 * is counted towards the lockout, and is audited as login.failed reason `address`; the ranges
 * are checked before the password, so no password hash runs for such an attempt.
 *
 * The gateway exposes no count of password hashes (no metric; the hash gate keeps no stats), so
 * the hashes are counted by wrapping the one function that runs them, `verifyPassword`: the
 * real function still runs, and a control login from inside the ranges shows the count moves.
 */
vi.mock('../../src/foundation/password-hash.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../../src/foundation/password-hash.js')>();
  return { ...original, verifyPassword: vi.fn(original.verifyPassword) };
});
const hashesRun = (): number => vi.mocked(verifyPassword).mock.calls.length;

const OUTSIDE = { 'x-forwarded-for': '10.8.0.1' };
const INSIDE = { 'x-forwarded-for': '10.9.1.1' };
const LOCKOUT_AFTER = 3;

describe('credential address ranges at login (D27)', () => {
  const opened: TestGateway[] = [];
  afterEach(async () => {
    for (const gw of opened.splice(0)) await gw.close();
  });

  /** A fresh gateway at T0, so that two answers can be compared header for header. */
  async function fresh(): Promise<TestGateway> {
    const gw = await createTestGateway({
      clock: new ManualClock(T0),
      overrides: { rateLimits: { login: { points: 100, windowSeconds: 60 }, loginLockout: { maxConsecutiveFailures: LOCKOUT_AFTER, lockoutSeconds: 1800 } } },
    });
    opened.push(gw);
    return gw;
  }

  function comparable(response: LightMyRequestResponse) {
    const body = response.json<Record<string, unknown>>();
    const { correlationId: _c, timestamp: _t, ...rest } = body;
    return { status: response.statusCode, body: rest, headers: stableHeaders(response.headers) };
  }

  it('answers the correct password from outside the ranges exactly like a wrong password', async () => {
    const wrong = await postLogin(await fresh(), 'ranged', 'not the password', OUTSIDE);
    const outside = await postLogin(await fresh(), 'ranged', PASSWORD, OUTSIDE);
    const insideWrong = await postLogin(await fresh(), 'ranged', 'not the password', INSIDE);
    // Status, code, message, details and every header but the correlation id and date.
    expect(comparable(outside)).toEqual(comparable(wrong));
    // The same as a wrong password from inside the range: the range is never revealed.
    expect(comparable(outside)).toEqual(comparable(insideWrong));
    const body = expectContractError(outside, 401, 'authentication_failed', 'Authentication failed');
    expect(body.details).toEqual({});
    expectContractError(wrong, 401, 'authentication_failed', 'Authentication failed');
  });

  it('checks the ranges before the password: no password hash runs for an attempt from outside them', async () => {
    const gw = await fresh();
    // Control: from inside the ranges the password is hashed, the right one and a wrong one alike.
    const start = hashesRun();
    expect((await postLogin(gw, 'ranged', PASSWORD, INSIDE)).statusCode).toBe(200);
    expect(hashesRun()).toBe(start + 1);

    const before = hashesRun();
    expectContractError(await postLogin(gw, 'ranged', PASSWORD, OUTSIDE), 401, 'authentication_failed', 'Authentication failed');
    expectContractError(await postLogin(gw, 'ranged', 'not the password', OUTSIDE), 401, 'authentication_failed', 'Authentication failed');
    expect(hashesRun(), 'password hashes run for attempts from outside the ranges').toBe(before);

    expectContractError(await postLogin(gw, 'ranged', 'not the password', INSIDE), 401, 'authentication_failed', 'Authentication failed');
    expect(hashesRun()).toBe(before + 1);
  });

  it('audits the refusal as login.failed reason address, and counts it towards the lockout', async () => {
    const gw = await fresh();
    const correlationIds: string[] = [];
    for (let attempt = 0; attempt < LOCKOUT_AFTER; attempt += 1) {
      const response = await postLogin(gw, 'ranged', PASSWORD, OUTSIDE);
      expectContractError(response, 401, 'authentication_failed', 'Authentication failed');
      correlationIds.push(String(response.headers['x-correlation-id']));
    }
    const records = auditRecords(gw);
    for (const correlationId of correlationIds) {
      const mine = records.filter((record) => record['correlationId'] === correlationId);
      expect(mine).toContainEqual(
        expect.objectContaining({ event: 'login.failed', outcome: 'failure', credential: 'cred-ranged', clientAddress: '10.8.0.1', reason: 'address' }),
      );
      expect(mine.filter((record) => record['event'] === 'login.succeeded' || record['event'] === 'access.denied')).toEqual([]);
    }
    // Three failures lock the username: even the right password from inside the range is refused.
    const locked = await postLogin(gw, 'ranged', PASSWORD, INSIDE);
    expectContractError(locked, 429, 'rate_limited', 'Rate limit exceeded, retry later');
  });
});
