import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { SessionService } from '../../auth/session-service.js';
import { errors } from '../../foundation/errors.js';
import { BEARER_CODES, BearerSecurity, BODY_CODES, documentedResponses, TRANSPORT_CODES } from '../openapi/documented-responses.js';

export const RefreshTokenBody = Type.Object(
  { refreshToken: Type.String({ minLength: 1, maxLength: 512, description: 'The newest refresh token of the session.' }) },
  {
    additionalProperties: false,
    title: 'RefreshTokenRequest',
    examples: [{ refreshToken: '7MbKbXsJQzSuOP97ThUJgA.0.N5PsicsE3NTuQ2v0m2bq5w9aV1nK3s8yJ0cXhRk4fLw' }],
  },
);

const RefreshResponse = Type.Object(
  {
    accessToken: Type.String({ description: 'The new bearer access token.' }),
    accessTokenExpiresAt: Type.Integer({ description: 'Unix seconds' }),
    refreshToken: Type.String({ description: 'The new refresh token; store it, the one just used stops working 60 s after its first use.' }),
    refreshTokenExpiresAt: Type.Integer({ description: "Unix seconds: 24 hours from issuance, or the session's end if that is earlier (D41)." }),
  },
  { title: 'RefreshedTokens' },
);

/** The validation example of the refresh-token body, which refresh and logout share. */
export const REFRESH_BODY_EXAMPLE = errors.validation([{ path: 'refreshToken', message: 'is required' }]);

/** POST /api/v1/auth/refresh (spec 4.2, D4, D5), inside the protected scope. */
export function registerRefreshRoute(scope: FastifyInstance, sessions: SessionService): void {
  scope.post<{ Body: Static<typeof RefreshTokenBody> }>(
    '/api/v1/auth/refresh',
    {
      config: { policy: { limits: ['refresh'], audited: true } },
      schema: {
        operationId: 'refresh',
        summary: 'Rotate the refresh token and get a new access token',
        description:
          "Needs both the current, unexpired access token (bearer) and the session's newest refresh token (body). Every success rotates the refresh token: the one presented keeps working for 60 seconds from its first use (each use answers the same new refresh token, so concurrent requests all succeed), after which presenting it revokes the whole session (401 `refresh_token_revoked`, at logout too). The new refresh token lives 24 hours, never past the session's end (`tokens.sessionMaxAgeHours`, 168 by default, after its login: then 401 `refresh_token_expired`); a session that ended with its credential (deactivated or given a new password since its login) gets 401 `refresh_token_revoked` (D41). Any 401 here means: log in again. Limited per credential (429 `rate_limited`).",
        tags: ['auth'],
        security: BearerSecurity,
        body: RefreshTokenBody,
        ...documentedResponses(RefreshResponse, {
          success: {
            status: 200,
            description: 'A new access token and the rotated refresh token.',
            headers: { 'Cache-Control': true },
            examples: {
              refreshed: {
                summary: 'Rotated',
                value: {
                  accessToken: 'eyJhbGciOiJFZERTQSIsImtpZCI6ImxvY2FsLTEifQ.eyJzdWIiOiJjcmVkLWRlbW8ifQ.c2lnbmF0dXJl',
                  accessTokenExpiresAt: 1795472013,
                  refreshToken: '7MbKbXsJQzSuOP97ThUJgA.1.99jL5neKGdd0Vb3q2m8aYk1fXcR6wT4uH0sZpL7nQeA',
                  refreshTokenExpiresAt: 1795554813,
                },
              },
            },
          },
          errors: [
            ...TRANSPORT_CODES,
            ...BODY_CODES,
            ...BEARER_CODES,
            'refresh_token_invalid',
            'refresh_token_expired',
            'refresh_token_revoked',
            'rate_limited',
            'internal_error',
            'store_unavailable',
            'audit_unavailable',
          ],
          rateLimited: true,
          errorExamples: { validation_failed: REFRESH_BODY_EXAMPLE },
        }),
      },
    },
    async (request, reply) => {
      const tokens = await sessions.refresh({
        credential: request.principal!.credential,
        refreshToken: request.body.refreshToken,
        correlationId: request.id,
        clientAddress: request.clientAddress,
      });
      reply.header('cache-control', 'no-store');
      return tokens;
    },
  );
}
