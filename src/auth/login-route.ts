import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { toEpochSeconds } from '../clock.js';
import { errors } from '../edge/errors.js';
import { errorResponses } from '../edge/schemas.js';
import type { AuthContext } from './auth-context.js';
import { subjectKey } from './auth-rate-limits.js';
import { admitsAddress } from './credentials.js';
import { verifyPassword } from './password-hash.js';
import { newRefreshToken } from './refresh-token.js';

const LoginBody = Type.Object(
  { username: Type.String({ minLength: 1, maxLength: 256 }), password: Type.String({ minLength: 1, maxLength: 1024 }) },
  { additionalProperties: false },
);

export const SessionTokensSchema = Type.Object({
  accessToken: Type.String(),
  accessTokenExpiresAt: Type.Integer({ description: 'Unix seconds' }),
  idToken: Type.String(),
  idTokenExpiresAt: Type.Integer({ description: 'Unix seconds' }),
  refreshToken: Type.String(),
  refreshTokenExpiresAt: Type.Integer({ description: 'Unix seconds' }),
});

/**
 * POST /api/v1/auth/login (spec 4.1). Order matters: the D11 limit and the D11a lockout are
 * checked before any password hashing; unknown usernames are verified against a dummy hash so
 * that they cost the same as a wrong password and get the same answer.
 */
export function registerLoginRoute(app: FastifyInstance, ctx: AuthContext): void {
  app.post<{ Body: Static<typeof LoginBody> }>(
    '/api/v1/auth/login',
    {
      schema: {
        summary: 'Log in with operator-issued credentials',
        tags: ['auth'],
        body: LoginBody,
        response: { 200: SessionTokensSchema, ...errorResponses(400, 401, 403, 415, 429, 503) },
      },
    },
    async (request, reply) => {
      const { username, password } = request.body;
      const { clock, store, audit, metrics, settings } = ctx;
      const subject = subjectKey(username);
      const base = { correlationId: request.id, clientAddress: request.clientAddress };

      try {
        await ctx.limits.consume('login', subject, reply);
      } catch (error) {
        if ((error as { status?: number }).status === 429) {
          metrics.logins.inc({ outcome: 'rate_limited' });
          audit.record({ ...base, event: 'login.rate_limited', outcome: 'denied', reason: 'rate_limit' });
        }
        throw error;
      }
      const lockedUntil = await store.lockouts.lockedUntil(subject, clock.now());
      if (lockedUntil > 0) {
        metrics.logins.inc({ outcome: 'locked_out' });
        metrics.rateLimited.inc({ limiter: 'login_lockout' });
        audit.record({ ...base, event: 'login.locked_out', outcome: 'denied', reason: 'lockout' });
        throw errors.rateLimited((lockedUntil - clock.now()) / 1000);
      }

      const credential = ctx.live.current.credentials.byUsername(username);
      const passwordMatches = await verifyPassword(password, credential?.passwordHash ?? ctx.dummyHash);
      if (!credential || !passwordMatches || !credential.active) {
        const reason = !credential ? 'unknown_username' : !passwordMatches ? 'wrong_password' : 'inactive';
        const { maxConsecutiveFailures, lockoutSeconds } = settings.rateLimits.loginLockout;
        const lockedNow = await store.lockouts.recordFailure(subject, { now: clock.now(), maxFailures: maxConsecutiveFailures, lockoutMs: lockoutSeconds * 1000 });
        metrics.logins.inc({ outcome: 'failed' });
        audit.record({ ...base, event: 'login.failed', outcome: 'failure', credential: credential?.id, reason });
        if (lockedNow > 0) audit.record({ ...base, event: 'login.locked_out', outcome: 'denied', credential: credential?.id, reason: 'lockout_started' });
        throw errors.authenticationFailed();
      }
      if (!admitsAddress(credential, request.clientAddress)) {
        metrics.logins.inc({ outcome: 'denied' });
        metrics.accessDenied.inc({ reason: 'address' });
        audit.record({ ...base, event: 'access.denied', outcome: 'denied', credential: credential.id, reason: 'address' });
        throw errors.forbidden('Client address is not registered for this credential');
      }
      await store.lockouts.reset(subject);

      const now = clock.now();
      const refresh = newRefreshToken();
      const refreshExpiresAt = now + settings.tokens.refreshTokenTtlSeconds * 1000;
      await store.sessions.createFamily({ token: refresh.ref, credentialId: credential.id, expiresAt: refreshExpiresAt, now });
      const [access, id] = await Promise.all([ctx.tokens.issueAccessToken(credential), ctx.tokens.issueIdToken(credential, toEpochSeconds(now))]);

      metrics.logins.inc({ outcome: 'succeeded' });
      audit.record({ ...base, event: 'login.succeeded', outcome: 'success', credential: credential.id });
      reply.header('cache-control', 'no-store');
      return {
        accessToken: access.token,
        accessTokenExpiresAt: access.expiresAt,
        idToken: id.token,
        idTokenExpiresAt: id.expiresAt,
        refreshToken: refresh.token,
        refreshTokenExpiresAt: toEpochSeconds(refreshExpiresAt),
      };
    },
  );
}
