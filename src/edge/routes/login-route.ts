import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { SessionService } from '../../auth/session-service.js';
import { errors } from '../../foundation/errors.js';
import { BODY_CODES, documentedResponses, PublicSecurity, TRANSPORT_CODES } from '../openapi/documented-responses.js';

export const LoginBodySchema = Type.Object(
  { username: Type.String({ minLength: 1, maxLength: 256 }), password: Type.String({ minLength: 1, maxLength: 1024 }) },
  { additionalProperties: false, title: 'LoginRequest', examples: [{ username: 'demo', password: 'local-demo-password' }] },
);

export const SessionTokensSchema = Type.Object(
  {
    accessToken: Type.String({ description: 'The bearer token of every other call; lives an hour.' }),
    accessTokenExpiresAt: Type.Integer({ description: 'Unix seconds' }),
    idToken: Type.String({ description: 'Identifies the credential; verify it against the public keys. Never accepted as a bearer token.' }),
    idTokenExpiresAt: Type.Integer({ description: 'Unix seconds' }),
    refreshToken: Type.String({ description: 'Obtains a new access token at refresh; rotated on each use.' }),
    refreshTokenExpiresAt: Type.Integer({
      description: "Unix seconds: 24 hours from issuance, or the session's end (login + tokens.sessionMaxAgeHours) if that is earlier.",
    }),
  },
  { title: 'SessionTokens' },
);

/** POST /api/v1/auth/login (spec 4.1). Limits: per client address, then per username (D11, D27). */
export function registerLoginRoute(app: FastifyInstance, sessions: SessionService): void {
  app.post<{ Body: Static<typeof LoginBodySchema> }>(
    '/api/v1/auth/login',
    {
      // The per-username limit is counted with the login's lockout read and new family (one round trip).
      config: { policy: { limits: ['loginAddress', 'login'], limitsWithHandler: true, audited: true } },
      schema: {
        operationId: 'login',
        summary: 'Log in with operator-issued credentials',
        description:
          "Returns the access, ID and refresh tokens of a new session. A wrong username or password, a deactivated credential and an address outside the credential's ranges all get the same 401 `authentication_failed`; failed logins count towards the lockout. Limited per username and per client address (429 `rate_limited`).",
        tags: ['auth'],
        security: PublicSecurity,
        body: LoginBodySchema,
        ...documentedResponses(SessionTokensSchema, {
          success: {
            status: 200,
            description: 'Logged in: the tokens of a new session.',
            headers: { 'Cache-Control': true },
            examples: {
              session: {
                summary: 'A new session',
                value: {
                  accessToken: 'eyJhbGciOiJFZERTQSIsImtpZCI6ImxvY2FsLTEifQ.eyJzdWIiOiJjcmVkLWRlbW8ifQ.c2lnbmF0dXJl',
                  accessTokenExpiresAt: 1795472013,
                  idToken: 'eyJhbGciOiJFZERTQSIsImtpZCI6ImxvY2FsLTEifQ.eyJzdWIiOiJjcmVkLWRlbW8iLCJhdWQiOiJkZW1vIn0.c2lnbmF0dXJl',
                  idTokenExpiresAt: 1795472013,
                  refreshToken: '7MbKbXsJQzSuOP97ThUJgA.0.N5PsicsE3NTuQ2v0m2bq5w9aV1nK3s8yJ0cXhRk4fLw',
                  refreshTokenExpiresAt: 1795554813,
                },
              },
            },
          },
          errors: [
            ...TRANSPORT_CODES,
            ...BODY_CODES,
            'authentication_failed',
            'rate_limited',
            'internal_error',
            'store_unavailable',
            'audit_unavailable',
            'server_busy',
          ],
          rateLimited: true,
          errorExamples: { validation_failed: errors.validation([{ path: 'password', message: 'is required' }]) },
        }),
      },
    },
    async (request, reply) => {
      const tokens = await sessions.login({
        ...request.body,
        admitted: request.limitsChecked ?? Promise.resolve(),
        correlationId: request.id,
        clientAddress: request.clientAddress,
      });
      reply.header('cache-control', 'no-store');
      return tokens;
    },
  );
}
