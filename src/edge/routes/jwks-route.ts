import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { TokenService } from '../../auth/token-service.js';
import { documentedResponses, PublicSecurity, TRANSPORT_CODES } from '../openapi/documented-responses.js';

const JwksSchema = Type.Object(
  {
    keys: Type.Array(
      Type.Object(
        {
          kty: Type.String({ description: 'Key type (OKP for Ed25519).' }),
          kid: Type.String({ description: "Key id, as in the tokens' header." }),
        },
        { additionalProperties: true, description: 'A public JSON Web Key (RFC 7517).' },
      ),
    ),
  },
  { title: 'JsonWebKeySet' },
);

/** GET /.well-known/jwks.json (D24): public keys for offline ID-token checks across rotations. */
export function registerJwksRoute(app: FastifyInstance, tokens: TokenService): void {
  app.get(
    '/.well-known/jwks.json',
    {
      schema: {
        operationId: 'getJwks',
        summary: 'Public verification keys (JWKS)',
        description:
          'The public keys that verify ID tokens offline: the current signing key and any still trusted after a rotation. Cache them for at most 5 minutes.',
        tags: ['auth'],
        security: PublicSecurity,
        ...documentedResponses(JwksSchema, {
          success: {
            status: 200,
            description: 'The key set.',
            headers: { 'Cache-Control': true },
            examples: {
              keys: {
                summary: 'One Ed25519 key',
                value: { keys: [{ kty: 'OKP', crv: 'Ed25519', x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo', kid: 'local-1', alg: 'EdDSA', use: 'sig' }] },
              },
            },
          },
          errors: TRANSPORT_CODES,
        }),
      },
    },
    async (_request, reply) => {
      reply.header('cache-control', 'public, max-age=300');
      return tokens.jwks;
    },
  );
}
