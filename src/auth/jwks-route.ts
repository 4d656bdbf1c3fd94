import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { TokenService } from './token-service.js';

/** GET /.well-known/jwks.json (D24): public keys for offline ID-token checks across rotations. */
export function registerJwksRoute(app: FastifyInstance, tokens: TokenService): void {
  app.get(
    '/.well-known/jwks.json',
    {
      schema: {
        summary: 'Public verification keys (JWKS)',
        tags: ['auth'],
        response: { 200: Type.Object({ keys: Type.Array(Type.Object({}, { additionalProperties: true })) }) },
      },
    },
    async (_request, reply) => {
      reply.header('cache-control', 'public, max-age=300');
      return tokens.jwks;
    },
  );
}
