import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { SessionService } from '../../auth/session-service.js';
import { BEARER_CODES, BearerSecurity, BODY_CODES, documentedResponses, TRANSPORT_CODES } from '../openapi/documented-responses.js';
import { REFRESH_BODY_EXAMPLE, RefreshTokenBody } from './refresh-route.js';

const LoggedOut = Type.Object({ message: Type.String() }, { title: 'LoggedOut' });

/** POST /api/v1/auth/logout (spec 4.3, D6). The bearer access token stays valid until it expires. */
export function registerLogoutRoute(scope: FastifyInstance, sessions: SessionService): void {
  scope.post<{ Body: Static<typeof RefreshTokenBody> }>(
    '/api/v1/auth/logout',
    {
      config: { policy: { audited: true } },
      schema: {
        operationId: 'logout',
        summary: 'Revoke a refresh token and its whole session',
        description:
          'Needs the bearer access token and a refresh token of the session (body). Every refresh token of the session stops working; the access token does not (it expires within the hour): discard it. A token that is unknown, malformed or of another credential gets 401 `refresh_token_invalid`. A token of a session revoked already (logged out, or reused), an old token presented after its 60-second grace (reuse: the session is revoked now) and a token of a session that ended with its credential (deactivated or given a new password since its login, D41; revoked now) get 401 `refresh_token_revoked`, the answer refresh gives for them. An access token past its expiry gets 401 `token_expired` like any bearer call, and nothing is revoked.',
        tags: ['auth'],
        security: BearerSecurity,
        body: RefreshTokenBody,
        ...documentedResponses(LoggedOut, {
          success: {
            status: 200,
            description: 'The session is revoked.',
            headers: {},
            examples: { loggedOut: { summary: 'Logged out', value: { message: 'Logged out: the refresh token and its session are revoked' } } },
          },
          errors: [
            ...TRANSPORT_CODES,
            ...BODY_CODES,
            ...BEARER_CODES,
            'refresh_token_invalid',
            'refresh_token_expired',
            'refresh_token_revoked',
            'internal_error',
            'store_unavailable',
            'audit_unavailable',
          ],
          errorExamples: { validation_failed: REFRESH_BODY_EXAMPLE },
        }),
      },
    },
    async (request) => {
      await sessions.logout({
        credential: request.principal!.credential,
        refreshToken: request.body.refreshToken,
        correlationId: request.id,
        clientAddress: request.clientAddress,
      });
      return { message: 'Logged out: the refresh token and its session are revoked' };
    },
  );
}
