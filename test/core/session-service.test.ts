import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { PasswordHashGate } from '../../src/auth/password-hash-gate.js';
import { SessionService, type SessionTokens } from '../../src/auth/session-service.js';
import { TokenService } from '../../src/auth/token-service.js';
import type { Credential } from '../../src/config/credentials-file.js';
import { LiveSettings } from '../../src/config/live-settings.js';
import type { GatewayConfig } from '../../src/config/load-config.js';
import { ManualClock, toEpochSeconds } from '../../src/foundation/clock.js';
import { GatewayError, type ErrorCode } from '../../src/foundation/errors.js';
import { MemoryAuditSink } from '../../src/observability/audit.js';
import { GatewayMetrics } from '../../src/observability/metrics.js';
import { OutcomeRecorder, type Outcome } from '../../src/observability/outcomes.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { LogCapture, PASSWORD, testConfig } from '../support/config-fixture.js';

/**
 * The session use cases (login, refresh, logout) on their real collaborators, wired as
 * src/app.ts wires them, with no HTTP server: what issue 11 promised a Fastify-free core allows.
 */

const SECOND = 1000;
const DAY = 86_400 * SECOND;
const context = { correlationId: 'corr-session-test', clientAddress: '127.0.0.1' };

let config: GatewayConfig;

beforeAll(async () => {
  config = await testConfig();
});

interface Harness {
  sessions: SessionService;
  store: MemoryStore;
  clock: ManualClock;
  outcomes: () => Outcome[];
  /** What refusals made without hashing waited, in ms. */
  pauses: number[];
}

let harness: Harness;

beforeEach(async () => {
  const clock = new ManualClock();
  const store = new MemoryStore(() => clock.now());
  const outcomes = new OutcomeRecorder(new GatewayMetrics({ defaultMetrics: false }), new MemoryAuditSink(clock), new LogCapture().logger);
  const record = vi.spyOn(outcomes, 'record');
  const pauses: number[] = [];
  const sessions = new SessionService({
    pause: async (ms) => {
      pauses.push(ms);
    },
    store,
    clock,
    tokens: await TokenService.create(config.tokens, clock),
    live: new LiveSettings(config),
    settings: config,
    outcomes,
    revocations: { notBefore: () => 0 },
    hashGate: new PasswordHashGate(config.passwordHashing.maxConcurrent, config.passwordHashing.maxConcurrentPerAddress),
  });
  harness = {
    sessions,
    store,
    clock,
    pauses,
    outcomes: () => record.mock.calls.map(([outcome]) => outcome),
  };
});

afterEach(async () => {
  await harness.store.close();
});

/** A refusal must be a catalogue error (what the edge renders), not any thrown value. */
async function refusal(promise: Promise<unknown>): Promise<GatewayError> {
  const thrown = await promise.then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(thrown).toBeInstanceOf(GatewayError);
  return thrown as GatewayError;
}

async function expectRefused(promise: Promise<unknown>, code: ErrorCode): Promise<void> {
  expect((await refusal(promise)).code).toBe(code);
}

const login = (username = 'full', password = PASSWORD): Promise<SessionTokens> => harness.sessions.login({ ...context, username, password });
/** The bearer guard resolves the credential before refresh and logout run; here the config does. */
const credential = (id: string): Credential => config.credentials.byId(id)!;
const refresh = (refreshToken: string, credentialId = 'cred-full') =>
  harness.sessions.refresh({ ...context, credential: credential(credentialId), refreshToken });
const logout = (refreshToken: string, credentialId = 'cred-full') =>
  harness.sessions.logout({ ...context, credential: credential(credentialId), refreshToken });
const familyOf = (refreshToken: string) => harness.store.sessions.families.get(refreshToken.split('.')[0]!);

describe('login', () => {
  it('answers the six session fields, with expiries from the injected clock, and opens a family', async () => {
    const start = toEpochSeconds(harness.clock.now());
    const session = await login();

    expect(Object.keys(session).sort()).toEqual([
      'accessToken',
      'accessTokenExpiresAt',
      'idToken',
      'idTokenExpiresAt',
      'refreshToken',
      'refreshTokenExpiresAt',
    ]);
    expect(session.accessTokenExpiresAt).toBe(start + config.tokens.accessTokenTtlSeconds);
    expect(session.idTokenExpiresAt).toBe(start + config.tokens.accessTokenTtlSeconds);
    expect(session.refreshTokenExpiresAt).toBe(start + 86_400);
    expect(session.refreshToken).toMatch(/^[A-Za-z0-9_-]{22}\.0\.[A-Za-z0-9_-]{43}$/);
    expect(familyOf(session.refreshToken)).toMatchObject({ credentialId: 'cred-full', revoked: false });
    expect(harness.outcomes()).toEqual([{ name: 'login.succeeded', credential: 'cred-full' }]);
  });

  it('refuses a wrong password with authentication_failed and opens no family', async () => {
    await expectRefused(login('full', 'not the password'), 'authentication_failed');

    expect(harness.store.size().families).toBe(0);
    expect(harness.outcomes()).toEqual([{ name: 'login.failed', credential: 'cred-full', reason: 'wrong_password' }]);
  });

  it('refuses a correct password from outside the ranges without hashing, but only after a hash’s time', async () => {
    await expectRefused(login('full', 'not the password'), 'authentication_failed');
    expect(harness.pauses).toEqual([]);

    const outside = await refusal(login('ranged', PASSWORD));
    expect(outside.code).toBe('authentication_failed');
    // One wait, as long as the hash the wrong password cost (the unknown username would cost it too).
    expect(harness.pauses).toHaveLength(1);
    expect(harness.pauses[0]).toBeGreaterThan(0);
    expect(harness.outcomes()).toContainEqual({ name: 'login.failed', credential: 'cred-ranged', reason: 'address' });
  });

  it('refuses an unknown username with the very same error a wrong password gets', async () => {
    const wrongPassword = await refusal(login('full', 'not the password'));
    const unknownUser = await refusal(login('nobody', PASSWORD));

    expect({ code: unknownUser.code, message: unknownUser.message, status: unknownUser.status }).toEqual({
      code: wrongPassword.code,
      message: wrongPassword.message,
      status: wrongPassword.status,
    });
  });
});

describe('refresh', () => {
  it('rotates: a new token of the same family, expiring 24 h from the refresh', async () => {
    const session = await login();
    harness.clock.advance(10 * SECOND);
    const rotated = await refresh(session.refreshToken);

    expect(Object.keys(rotated).sort()).toEqual(['accessToken', 'accessTokenExpiresAt', 'refreshToken', 'refreshTokenExpiresAt']);
    expect(rotated.refreshToken).not.toBe(session.refreshToken);
    expect(rotated.refreshToken.split('.')[0]).toBe(session.refreshToken.split('.')[0]);
    expect(rotated.refreshTokenExpiresAt).toBe(toEpochSeconds(harness.clock.now() + DAY));
    expect(harness.outcomes().at(-1)).toEqual({ name: 'refresh.succeeded', credential: 'cred-full' });
  });

  it('treats the old token as reuse once the grace has passed, and revokes the whole family', async () => {
    const grace = config.tokens.refreshGraceSeconds * SECOND;
    const session = await login();
    const rotatedAt = harness.clock.now();
    const rotated = await refresh(session.refreshToken);

    // The last instant of the grace still rotates (a lost answer can be retried).
    harness.clock.set(rotatedAt + grace - 1);
    await refresh(session.refreshToken);

    harness.clock.set(rotatedAt + grace);
    await expectRefused(refresh(session.refreshToken), 'refresh_token_revoked');
    expect(harness.outcomes().at(-1)).toEqual({ name: 'refresh.reuse_detected', credential: 'cred-full', during: 'refresh' });
    expect(familyOf(session.refreshToken)?.revoked).toBe(true);

    // The family died, so the token the thief or the client holds is dead as well.
    await expectRefused(refresh(rotated.refreshToken), 'refresh_token_revoked');
    expect(harness.outcomes().at(-1)).toEqual({ name: 'refresh.failed', credential: 'cred-full', reason: 'revoked' });
  });

  it('works 1 ms before 24 h and is refused as expired at 24 h and after', async () => {
    const loggedInAt = harness.clock.now();
    const early = await login();
    const onTime = await login();
    const late = await login();

    harness.clock.set(loggedInAt + DAY - 1);
    await refresh(early.refreshToken);

    harness.clock.set(loggedInAt + DAY);
    await expectRefused(refresh(onTime.refreshToken), 'refresh_token_expired');
    expect(harness.outcomes().at(-1)).toEqual({ name: 'refresh.failed', credential: 'cred-full', reason: 'expired' });

    harness.clock.set(loggedInAt + DAY + 60 * SECOND);
    await expectRefused(refresh(late.refreshToken), 'refresh_token_expired');
  });

  it("refuses another credential's token as invalid and leaves it working for its owner", async () => {
    const owner = await login();
    await expectRefused(refresh(owner.refreshToken, 'cred-create'), 'refresh_token_invalid');
    expect(harness.outcomes().at(-1)).toEqual({ name: 'refresh.failed', credential: 'cred-create', reason: 'mismatch' });

    await refresh(owner.refreshToken);
  });
});

describe('logout', () => {
  it('revokes the family: the presented token and every sibling rotated from it', async () => {
    const session = await login();
    const rotated = await refresh(session.refreshToken);

    await logout(rotated.refreshToken);
    expect(harness.outcomes().at(-1)).toEqual({ name: 'logout.succeeded', credential: 'cred-full' });
    expect(familyOf(session.refreshToken)?.revoked).toBe(true);

    await expectRefused(refresh(rotated.refreshToken), 'refresh_token_revoked');
    await expectRefused(refresh(session.refreshToken), 'refresh_token_revoked');
  });

  it('refuses a second logout of the same family as revoked (what refresh answers), not as success', async () => {
    const session = await login();
    await logout(session.refreshToken);

    await expectRefused(logout(session.refreshToken), 'refresh_token_revoked');
    expect(harness.outcomes().at(-1)).toEqual({ name: 'logout.failed', credential: 'cred-full', reason: 'already-revoked' });
  });

  it('leaves the credential’s other sessions alone', async () => {
    const ended = await login();
    const other = await login();
    await logout(ended.refreshToken);

    await refresh(other.refreshToken);
  });
});
