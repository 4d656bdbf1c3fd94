import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { toEpochSeconds } from '../clock.js';
import { errors } from '../edge/errors.js';
import { BearerSecurity, errorResponses } from '../edge/schemas.js';
import type { RotateOutcome } from '../store/store-types.js';
import type { AuthContext } from './auth-context.js';
import { newRefreshToken, parseRefreshToken } from './refresh-token.js';

export const RefreshTokenBody = Type.Object({ refreshToken: Type.String({ minLength: 1, maxLength: 512 }) }, { additionalProperties: false });

const RefreshResponse = Type.Object({
  accessToken: Type.String(),
  accessTokenExpiresAt: Type.Integer({ description: 'Unix seconds' }),
  refreshToken: Type.String({ description: 'The new refresh token (D4); store it, the old one dies 60 s after its first use.' }),
  refreshTokenExpiresAt: Type.Integer({ description: 'Unix seconds' }),
});

const FAILURE_MESSAGES: Record<Exclude<RotateOutcome, 'rotated'>, string> = {
  unknown: 'Refresh token is invalid',
  mismatch: 'Refresh token is invalid',
  revoked: 'Refresh token is revoked',
  expired: 'Refresh token is expired',
  reuse: 'Refresh token is revoked',
};

/** POST /api/v1/auth/refresh (spec 4.2, D4, D5), inside the protected scope. */
export function registerRefreshRoute(app: FastifyInstance, ctx: AuthContext): void {
  app.post<{ Body: Static<typeof RefreshTokenBody> }>(
    '/api/v1/auth/refresh',
    {
      schema: {
        summary: 'Rotate the refresh token and get a new access token',
        tags: ['auth'],
        security: BearerSecurity,
        body: RefreshTokenBody,
        response: { 200: RefreshResponse, ...errorResponses(400, 401, 403, 415, 429, 503) },
      },
    },
    async (request, reply) => {
      const { credential } = request.principal!;
      const { clock, store, audit, metrics, settings } = ctx;
      const base = { correlationId: request.id, clientAddress: request.clientAddress, credential: credential.id };
      try {
        await ctx.limits.consume('refresh', credential.id, reply);
      } catch (error) {
        if ((error as { status?: number }).status === 429) {
          metrics.refreshes.inc({ outcome: 'rate_limited' });
          audit.record({ ...base, event: 'refresh.rate_limited', outcome: 'denied', reason: 'rate_limit' });
        }
        throw error;
      }

      const presented = parseRefreshToken(request.body.refreshToken);
      let outcome: RotateOutcome = 'unknown';
      const now = clock.now();
      const next = newRefreshToken(presented?.familyId);
      const nextExpiresAt = now + settings.tokens.refreshTokenTtlSeconds * 1000;
      if (presented) {
        outcome = await store.sessions.rotate({
          token: presented,
          credentialId: credential.id,
          newTokenHash: next.ref.tokenHash,
          newExpiresAt: nextExpiresAt,
          now,
          graceMs: settings.tokens.refreshGraceSeconds * 1000,
        });
      }
      if (outcome !== 'rotated') {
        metrics.refreshes.inc({ outcome });
        if (outcome === 'reuse') {
          metrics.reuseDetected.inc();
          audit.record({ ...base, event: 'refresh.reuse_detected', outcome: 'denied', reason: 'family_revoked' });
        } else {
          audit.record({ ...base, event: 'refresh.failed', outcome: 'failure', reason: outcome });
        }
        throw errors.authenticationFailed(FAILURE_MESSAGES[outcome]);
      }

      const access = await ctx.tokens.issueAccessToken(credential);
      metrics.refreshes.inc({ outcome: 'succeeded' });
      audit.record({ ...base, event: 'refresh.succeeded', outcome: 'success' });
      reply.header('cache-control', 'no-store');
      return {
        accessToken: access.token,
        accessTokenExpiresAt: access.expiresAt,
        refreshToken: next.token,
        refreshTokenExpiresAt: toEpochSeconds(nextExpiresAt),
      };
    },
  );
}
