import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PasswordHashGate } from '../../src/auth/password-hash-gate.js';
import { ManualClock } from '../../src/foundation/clock.js';
import type { ParsedHash } from '../../src/foundation/password-hash.js';
import { TEST_SCRYPT } from '../support/config-fixture.js';
import { DEFAULT_CREDENTIALS, PASSWORD, createTestGateway, type TestGateway } from '../support/gateway-fixture.js';
import { RELAXED_LIMITS, T0, expectUnauthorized, postLogin } from '../support/auth-requests.js';

/**
 * Spec 4.1 and the dummy-hash rule (passwords): an unknown username, a wrong password and an inactive
 * credential give the same answer, and an unknown username costs a real scrypt verification (one
 * hash, counted at the hash gate).
 */
/** The gate, recording the cost of each hash it ran. */
class RecordingGate extends PasswordHashGate {
  readonly costs: string[] = [];

  override tryVerify(source: string, password: string, stored: ParsedHash): Promise<boolean> | undefined {
    this.costs.push(`N=${stored.N} r=${stored.r} p=${stored.p} length=${stored.hash.length}`);
    return super.tryVerify(source, password, stored);
  }
}

describe('login failures that must look alike', () => {
  let gw: TestGateway;
  let gate: RecordingGate;

  beforeAll(async () => {
    gate = new RecordingGate(4, 4);
    gw = await createTestGateway({ clock: new ManualClock(T0), overrides: { rateLimits: RELAXED_LIMITS }, hashGate: gate });
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

  it('spends one password hash on an unknown username, as on a wrong password and an inactive credential', async () => {
    // Counted, not timed: the hash gate runs every password check itself, and the dummy hash is
    // a real scrypt hash. An unknown username that skipped the dummy hash (even one that still
    // took a slot at the gate) would count 0 here. The time it costs is a figure for the benchmark.
    const hashesOf = async (username: string, password: string): Promise<number> => {
      const before = gate.admitted;
      expect((await postLogin(gw, username, password)).statusCode).toBe(401);
      return gate.admitted - before;
    };
    for (let round = 0; round < 3; round += 1) {
      expect(await hashesOf(`unknown-${round}`, 'some password'), 'unknown username').toBe(1);
      expect(await hashesOf('create-only', `wrong password ${round}`), 'wrong password').toBe(1);
      expect(await hashesOf('inactive', PASSWORD), 'inactive credential').toBe(1);
    }
  });

  it("checks an unknown username at the cost the credentials' own hashes have, not at a fixed one", async () => {
    // The test credentials are hashed at N=1024, not at the default 2^14 a fixed dummy used: an
    // unknown username checked at another cost than a known one is told apart by its time.
    const known = `N=${TEST_SCRYPT.N} r=${TEST_SCRYPT.r} p=${TEST_SCRYPT.p} length=32`;
    const costOf = async (username: string, password: string): Promise<string | undefined> => {
      const before = gate.costs.length;
      expect((await postLogin(gw, username, password)).statusCode).toBe(401);
      expect(gate.costs.length - before).toBe(1);
      return gate.costs.at(-1);
    };
    expect(await costOf('create-only', 'a wrong password')).toBe(known);
    expect(await costOf('nobody-known-by-this-name', 'a wrong password')).toBe(known);
  });
});
