import { setTimeout as pause } from 'node:timers/promises';
import { toEpochSeconds, type Clock } from '../foundation/clock.js';
import type { LiveSettings } from '../config/live-settings.js';
import type { GatewayConfig } from '../config/config-types.js';
import { admitsAddress, type Credential } from '../config/credentials-file.js';
import { addressBucket } from '../foundation/address-ranges.js';
import { errors, type GatewayError } from '../foundation/errors.js';
import type { Outcomes, RefreshFailure, RequestContext } from '../observability/outcomes.js';
import type { GatewayStore, RevokeOutcome, RotateResult, SessionBinding } from '../store/store-types.js';
import { subjectKey } from './auth-rate-limits.js';
import type { PasswordHashGate } from './password-hash-gate.js';
import { newRefreshToken, openSuccessor, parseRefreshToken, successorOf } from './refresh-token.js';
import type { TokenService } from './token-service.js';

/** The six session fields of a login (spec 2.1); instants in Unix seconds. */
export interface SessionTokens {
  accessToken: string;
  accessTokenExpiresAt: number;
  idToken: string;
  idTokenExpiresAt: number;
  refreshToken: string;
  refreshTokenExpiresAt: number;
}

/** A refresh answers a new access token and the rotated refresh token (D4). */
export type RefreshedTokens = Omit<SessionTokens, 'idToken' | 'idTokenExpiresAt'>;

const REFRESH_FAILURES: Record<RefreshFailure, () => GatewayError> = {
  unknown: () => errors.refreshTokenInvalid(),
  mismatch: () => errors.refreshTokenInvalid(),
  revoked: errors.refreshTokenRevoked,
  ended: errors.refreshTokenRevoked,
  expired: errors.refreshTokenExpired,
};

/**
 * Logout answers one situation as refresh does (issue 35): a session revoked already, a token
 * past its grace (reuse, revoked now) and a session ended with its credential are all
 * `refresh_token_revoked`; an unknown token or one of another credential `refresh_token_invalid`.
 */
const LOGOUT_FAILURES: Record<Exclude<RevokeOutcome, 'revoked'>, () => GatewayError> = {
  unknown: () => errors.refreshTokenInvalid(),
  mismatch: () => errors.refreshTokenInvalid(),
  'already-revoked': errors.refreshTokenRevoked,
  'rotated-out': errors.refreshTokenRevoked,
  ended: errors.refreshTokenRevoked,
  expired: errors.refreshTokenExpired,
};

const HOUR_MS = 3_600_000;

/**
 * Sessions: login, refresh and logout (spec 4.1-4.3, D3-D7, D11a, D27). Plain inputs, typed
 * results; refusals are catalogue errors. Rate limits are applied before these run (the route
 * policy), so what is left here is each use case's own order of checks.
 */
export class SessionService {
  constructor(
    private readonly deps: {
      store: GatewayStore;
      clock: Clock;
      tokens: TokenService;
      live: LiveSettings;
      settings: Pick<GatewayConfig, 'tokens' | 'rateLimits'>;
      outcomes: Outcomes;
      /** Credentials' not-before instants (D41), held in memory (credential-revocations.ts). */
      revocations: { notBefore(credentialId: string): number };
      hashGate: PasswordHashGate;
      /** How a refusal made without hashing waits out a hash's time (a timer: no CPU). */
      pause?: (ms: number) => Promise<void>;
    },
  ) {}

  /** A recent password check's duration (moving average), in ms: what a refusal without one waits. */
  #typicalHashMs = 0;

  /**
   * D27: the lockout and the credential's address ranges are checked before any password
   * hashing (the limits already were, or are counted with the lockout: `admitted`); a correct
   * password from outside the ranges gets the answer a wrong one gets. Hashing is capped: past
   * the cap, 503 at once.
   *
   * Two store round trips for a login (issue 35), besides the per-address limit the route
   * counts before reading the body: the checks before hashing and the new session's family go
   * out together, and a success sends nothing more unless failures were counted (the reset). The
   * family is written before the password is checked: its refresh token is made here and never
   * leaves the gateway unless the login succeeds, and every other outcome deletes the family (in
   * the round trip that counts the failure). One left behind by a crash or a store failure
   * between is unreachable and expires with its token.
   */
  async login(input: { username: string; password: string; admitted?: Promise<void> } & RequestContext): Promise<SessionTokens> {
    const { store, clock, outcomes, settings, tokens } = this.deps;
    const subject = subjectKey(input.username);
    const directory = this.deps.live.current.credentials;
    const credential = directory.byUsername(input.username);
    const now = clock.now();
    const session = credential && this.#newSession(credential, now);
    // One turn of the event loop: the store client sends these in one write (redis-client.ts).
    const [admitted, lockout, opened] = await Promise.allSettled([
      input.admitted ?? Promise.resolve(),
      store.lockouts.read(subject, now),
      session ? store.sessions.createFamily(session.family) : Promise.resolve(),
    ]);
    const discard = (): Promise<void> => (session ? store.sessions.discardFamily(session.family.token.familyId).catch(() => undefined) : Promise.resolve());
    const refused = async (error: unknown): Promise<never> => {
      await discard();
      throw error;
    };
    // The limit's refusal first (429, as when it was counted before the handler), then the store's.
    if (admitted.status === 'rejected') return refused(admitted.reason);
    if (lockout.status === 'rejected') return refused(lockout.reason);
    if (opened.status === 'rejected') return refused(opened.reason);
    if (lockout.value.lockedUntil > 0) {
      outcomes.record({ name: 'login.locked_out' }, input);
      return refused(errors.lockedOut((lockout.value.lockedUntil - clock.now()) / 1000));
    }

    const failed = async (reason: 'unknown_username' | 'wrong_password' | 'inactive' | 'address') => {
      const { maxConsecutiveFailures, lockoutSeconds } = settings.rateLimits.loginLockout;
      // The failure count and the family's removal go out together: one round trip.
      const [lockedNow] = await Promise.all([
        store.lockouts.recordFailure(subject, { now: clock.now(), maxFailures: maxConsecutiveFailures, lockoutMs: lockoutSeconds * 1000 }),
        discard(),
      ]);
      outcomes.record({ name: 'login.failed', credential: credential?.id, reason }, input);
      if (lockedNow > 0) outcomes.record({ name: 'login.lockout_started', credential: credential?.id }, input);
      return errors.authenticationFailed();
    };
    if (credential && !admitsAddress(credential, input.clientAddress)) {
      // Refused before hashing (D27), yet answered no sooner than a hash would be: a fast 401
      // would tell a client outside the ranges that this username exists (an unknown one pays
      // for the dummy hash).
      const error = await failed('address');
      await (this.deps.pause ?? pause)(this.#typicalHashMs);
      throw error;
    }

    const started = performance.now();
    const verifying = this.deps.hashGate.tryVerify(addressBucket(input.clientAddress), input.password, credential?.passwordHash ?? directory.unknownUserHash);
    if (!verifying) {
      outcomes.record({ name: 'login.busy' }, input);
      return refused(errors.serverBusy());
    }
    const passwordMatches = await verifying;
    const took = performance.now() - started;
    this.#typicalHashMs = this.#typicalHashMs === 0 ? took : 0.8 * this.#typicalHashMs + 0.2 * took;
    if (!credential || !session) throw await failed('unknown_username');
    if (!passwordMatches) throw await failed('wrong_password');
    if (!credential.active) throw await failed('inactive');

    // D11a: a success clears the failures counted, if any (signing overlaps the round trip).
    const [access, id] = await Promise.all([
      tokens.issueAccessToken(credential),
      tokens.issueIdToken(credential, toEpochSeconds(now)),
      lockout.value.failures > 0 ? store.lockouts.reset(subject) : undefined,
    ]);
    outcomes.record({ name: 'login.succeeded', credential: credential.id }, input);
    return {
      accessToken: access.token,
      accessTokenExpiresAt: access.expiresAt,
      idToken: id.token,
      idTokenExpiresAt: id.expiresAt,
      refreshToken: session.refreshToken,
      refreshTokenExpiresAt: toEpochSeconds(session.family.expiresAt),
    };
  }

  /** The family a login of `credential` at `now` opens, and its first refresh token. */
  #newSession(credential: Credential, now: number) {
    const { settings } = this.deps;
    const refresh = newRefreshToken();
    // D41: the session ends at login + sessionMaxAgeHours, whatever its rotations; no token outlives it.
    const endsAt = now + settings.tokens.sessionMaxAgeHours * HOUR_MS;
    const expiresAt = Math.min(now + settings.tokens.refreshTokenTtlSeconds * 1000, endsAt);
    return {
      refreshToken: refresh.token,
      family: { token: refresh.ref, credentialId: credential.id, fingerprint: credential.secretFingerprint, expiresAt, endsAt, now },
    };
  }

  /**
   * D4, D5: rotates the presented refresh token of `credential`'s own session; the token it
   * replaced, presented again within its grace, is answered the same new token; reuse past the
   * grace revokes the family.
   */
  async refresh(input: { credential: Credential; refreshToken: string } & RequestContext): Promise<RefreshedTokens> {
    const { store, clock, outcomes, settings, tokens } = this.deps;
    const { credential } = input;
    const presented = parseRefreshToken(input.refreshToken);
    const now = clock.now();
    let rotation: RotateResult = { outcome: 'unknown' };
    let refreshToken: string | undefined;
    if (presented) {
      const next = successorOf(input.refreshToken, presented);
      rotation = await store.sessions.rotate({
        token: presented,
        credentialId: credential.id,
        ...this.#binding(credential),
        next: { tokenHash: next.ref.tokenHash, sealed: next.sealed },
        newExpiresAt: now + settings.tokens.refreshTokenTtlSeconds * 1000,
        now,
        graceMs: settings.tokens.refreshGraceSeconds * 1000,
      });
      if (rotation.outcome === 'rotated') refreshToken = next.token;
      // A sibling (D5): the successor the first rotation stored, opened with the presented token.
      if (rotation.outcome === 'sibling') refreshToken = openSuccessor(input.refreshToken, presented, rotation.sealed, rotation.tokenHash);
    }
    if (rotation.outcome === 'reuse') {
      outcomes.record({ name: 'refresh.reuse_detected', credential: credential.id, during: 'refresh' }, input);
      throw errors.refreshTokenRevoked();
    }
    if (rotation.outcome !== 'rotated' && rotation.outcome !== 'sibling') {
      outcomes.record({ name: 'refresh.failed', credential: credential.id, reason: rotation.outcome }, input);
      throw REFRESH_FAILURES[rotation.outcome]();
    }
    if (refreshToken === undefined) {
      // A seal that does not open to the family's current token: never the case for a token we issued.
      outcomes.record({ name: 'refresh.failed', credential: credential.id, reason: 'unknown' }, input);
      throw REFRESH_FAILURES.unknown();
    }
    const access = await tokens.issueAccessToken(credential);
    outcomes.record({ name: 'refresh.succeeded', credential: credential.id }, input);
    return {
      accessToken: access.token,
      accessTokenExpiresAt: access.expiresAt,
      refreshToken,
      // The earlier of the token's own lifetime and the session's end (the store capped it).
      refreshTokenExpiresAt: toEpochSeconds(rotation.expiresAt),
    };
  }

  /** What a refresh or logout checks the session against (D41): the credential's secret and not-before instant now. */
  #binding(credential: Credential): SessionBinding {
    return { fingerprint: credential.secretFingerprint, notBefore: this.deps.revocations.notBefore(credential.id) };
  }

  /**
   * D6: revokes the presented token's whole family, grace siblings included. A token presented
   * after its grace is reuse (D5): the family is revoked all the same, and the answer is what
   * refresh answers for it, 401 `refresh_token_revoked`; so is a family revoked already.
   */
  async logout(input: { credential: Credential; refreshToken: string } & RequestContext): Promise<void> {
    const { store, clock, outcomes, settings } = this.deps;
    const { credential } = input;
    const presented = parseRefreshToken(input.refreshToken);
    const outcome = presented
      ? await store.sessions.revokeFamily({
          token: presented,
          credentialId: credential.id,
          ...this.#binding(credential),
          now: clock.now(),
          graceMs: settings.tokens.refreshGraceSeconds * 1000,
        })
      : 'unknown';
    if (outcome === 'revoked') {
      outcomes.record({ name: 'logout.succeeded', credential: credential.id }, input);
      return;
    }
    outcomes.record({ name: 'logout.failed', credential: credential.id, reason: outcome }, input);
    if (outcome === 'rotated-out') outcomes.record({ name: 'refresh.reuse_detected', credential: credential.id, during: 'logout' }, input);
    throw LOGOUT_FAILURES[outcome]();
  }
}
