import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { errors } from '../edge/errors.js';
import { BearerSecurity, errorResponses } from '../edge/schemas.js';
import type { RevokeOutcome } from '../store/store-types.js';
import type { AuthContext } from './auth-context.js';
import { parseRefreshToken } from './refresh-token.js';
import { RefreshTokenBody } from './refresh-route.js';

/**
 * POST /api/v1/auth/logout (spec 4.3, D6): revokes the presented token's whole family, grace
 * siblings included. The bearer access token stays valid until it expires (spec 3).
 */
export function registerLogoutRoute(app: FastifyInstance, ctx: AuthContext): void {
  app.post<{ Body: Static<typeof RefreshTokenBody> }>(
    '/api/v1/auth/logout',
    {
      schema: {
        summary: 'Revoke a refresh token and its whole session',
        tags: ['auth'],
        security: BearerSecurity,
        body: RefreshTokenBody,
        response: { 200: Type.Object({ message: Type.String() }), ...errorResponses(400, 401, 403, 415, 503) },
      },
    },
    async (request) => {
      const { credential } = request.principal!;
      const presented = parseRefreshToken(request.body.refreshToken);
      const outcome: RevokeOutcome = presented
        ? await ctx.store.sessions.revokeFamily({ token: presented, credentialId: credential.id, now: ctx.clock.now(), graceMs: ctx.settings.tokens.refreshGraceSeconds * 1000 })
        : 'unknown';
      const base = { event: 'logout' as const, correlationId: request.id, clientAddress: request.clientAddress, credential: credential.id };
      if (outcome !== 'revoked') {
        ctx.metrics.logouts.inc({ outcome: 'failed' });
        ctx.audit.record({ ...base, outcome: 'failure', reason: outcome });
        if (outcome === 'rotated-out') {
          ctx.metrics.reuseDetected.inc();
          ctx.audit.record({ ...base, event: 'refresh.reuse_detected', outcome: 'denied', reason: 'family_revoked' });
        }
        throw errors.authenticationFailed(outcome === 'expired' ? 'Refresh token is expired' : 'Refresh token is invalid or already revoked');
      }
      ctx.metrics.logouts.inc({ outcome: 'succeeded' });
      ctx.audit.record({ ...base, outcome: 'success' });
      return { message: 'Logged out: the refresh token and its session are revoked' };
    },
  );
}
