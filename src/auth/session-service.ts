import { setTimeout as pause } from 'node:timers/promises';
import { toEpochSeconds, type Clock } from '../foundation/clock.js';
import type { LiveSettings } from '../config/live-settings.js';
import type { GatewayConfig } from '../config/config-types.js';
import { admitsAddress, type Credential } from '../config/credentials-file.js';
import { addressBucket } from '../foundation/address-ranges.js';
import { errors, type GatewayError } from '../foundation/errors.js';
import type { Outcomes, RefreshFailure, RequestContext } from '../observability/outcomes.js';
import type { GatewayStore, RotateResult, SessionBinding } from '../store/store-types.js';
import { subjectKey } from './auth-rate-limits.js';
import type { PasswordHashGate } from './password-hash-gate.js';
import { newRefreshToken, parseRefreshToken } from './refresh-token.js';
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
   * hashing (the limits already were); a correct password from outside the ranges gets the
   * answer a wrong one gets. Hashing is capped: past the cap, 503 at once.
   */
  async login(input: { username: string; password: string } & RequestContext): Promise<SessionTokens> {
    const { store, clock, outcomes, settings, tokens } = this.deps;
    const subject = subjectKey(input.username);
    const lockedUntil = await store.lockouts.lockedUntil(subject, clock.now());
    if (lockedUntil > 0) {
      outcomes.record({ name: 'login.locked_out' }, input);
      throw errors.lockedOut((lockedUntil - clock.now()) / 1000);
    }

    const directory = this.deps.live.current.credentials;
    const credential = directory.byUsername(input.username);
    const failed = async (reason: 'unknown_username' | 'wrong_password' | 'inactive' | 'address') => {
      const { maxConsecutiveFailures, lockoutSeconds } = settings.rateLimits.loginLockout;
      const lockedNow = await store.lockouts.recordFailure(subject, {
        now: clock.now(),
        maxFailures: maxConsecutiveFailures,
        lockoutMs: lockoutSeconds * 1000,
      });
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
      throw errors.serverBusy();
    }
    const passwordMatches = await verifying;
    const took = performance.now() - started;
    this.#typicalHashMs = this.#typicalHashMs === 0 ? took : 0.8 * this.#typicalHashMs + 0.2 * took;
    if (!credential) throw await failed('unknown_username');
    if (!passwordMatches) throw await failed('wrong_password');
    if (!credential.active) throw await failed('inactive');
    await store.lockouts.reset(subject);

    const now = clock.now();
    const refresh = newRefreshToken();
    // D41: the session ends at login + sessionMaxAgeHours, whatever its rotations; no token outlives it.
    const sessionEndsAt = now + settings.tokens.sessionMaxAgeHours * HOUR_MS;
    const refreshExpiresAt = Math.min(now + settings.tokens.refreshTokenTtlSeconds * 1000, sessionEndsAt);
    await store.sessions.createFamily({
      token: refresh.ref,
      credentialId: credential.id,
      fingerprint: credential.secretFingerprint,
      expiresAt: refreshExpiresAt,
      endsAt: sessionEndsAt,
      now,
    });
    const [access, id] = await Promise.all([tokens.issueAccessToken(credential), tokens.issueIdToken(credential, toEpochSeconds(now))]);
    outcomes.record({ name: 'login.succeeded', credential: credential.id }, input);
    return {
      accessToken: access.token,
      accessTokenExpiresAt: access.expiresAt,
      idToken: id.token,
      idTokenExpiresAt: id.expiresAt,
      refreshToken: refresh.token,
      refreshTokenExpiresAt: toEpochSeconds(refreshExpiresAt),
    };
  }

  /** D4, D5: rotates the presented refresh token of `credential`'s own session; reuse past the grace revokes the family. */
  async refresh(input: { credential: Credential; refreshToken: string } & RequestContext): Promise<RefreshedTokens> {
    const { store, clock, outcomes, settings, tokens } = this.deps;
    const { credential } = input;
    const presented = parseRefreshToken(input.refreshToken);
    const now = clock.now();
    const next = newRefreshToken(presented?.familyId);
    const rotation: RotateResult = presented
      ? await store.sessions.rotate({
          token: presented,
          credentialId: credential.id,
          ...this.#binding(credential),
          newTokenHash: next.ref.tokenHash,
          newExpiresAt: now + settings.tokens.refreshTokenTtlSeconds * 1000,
          now,
          graceMs: settings.tokens.refreshGraceSeconds * 1000,
        })
      : { outcome: 'unknown' };
    if (rotation.outcome === 'reuse') {
      outcomes.record({ name: 'refresh.reuse_detected', credential: credential.id, during: 'refresh' }, input);
      throw errors.refreshTokenRevoked();
    }
    if (rotation.outcome !== 'rotated') {
      outcomes.record({ name: 'refresh.failed', credential: credential.id, reason: rotation.outcome }, input);
      throw REFRESH_FAILURES[rotation.outcome]();
    }
    const access = await tokens.issueAccessToken(credential);
    outcomes.record({ name: 'refresh.succeeded', credential: credential.id }, input);
    return {
      accessToken: access.token,
      accessTokenExpiresAt: access.expiresAt,
      refreshToken: next.token,
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
   * after its grace is reuse (D5): the family is revoked all the same, and the answer is 401.
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
    if (outcome === 'ended') throw errors.refreshTokenRevoked();
    throw outcome === 'expired' ? errors.refreshTokenExpired() : errors.refreshTokenInvalid('Refresh token is invalid or already revoked');
  }
}
