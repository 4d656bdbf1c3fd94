import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import { decorateOpenApi, type Document } from './decorate.js';
import { eventWebhooks } from './webhooks.js';

const DESCRIPTION = `The card issuing gateway's public API: log in with operator-issued credentials, keep the session alive with refresh, and create virtual cards idempotently.

docs/api-guide.md in the repository explains the flows; this description is its exact reference.

- Every answer carries \`X-Correlation-Id\`. Every error is the \`ErrorEnvelope\` with a stable \`code\`; each response below lists the codes it can carry, with one example per code.
- Requests for a path that no operation has are answered with the \`NotFound\` response (\`not_found\`, 404), and a known path called with another method with \`MethodNotAllowed\` (\`method_not_allowed\`, 405, with \`Allow\`); see components.responses.
- Answers to broken HTTP and the refusals before routing (allowlist, plain HTTP, over-long URL or headers, timeouts, shutting down) can come before the request reaches any operation; they are listed under every operation.`;

/** The swagger plugin's options: OpenAPI 3.1, named schemas, servers, tags, and the decoration of decorate.ts. */
export function openApiOptions(version: string): FastifyDynamicSwaggerOptions {
  return {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'Card issuing gateway', version, description: DESCRIPTION },
      servers: [
        {
          url: 'https://{host}:{port}',
          description: "The environment's base address (sandbox or production), given by the operator. The defaults are the local gateway of `npm start`.",
          variables: {
            host: { default: '127.0.0.1', description: 'Host name of the environment.' },
            port: { default: '8443', description: 'TLS port of the environment.' },
          },
        },
      ],
      tags: [
        { name: 'auth', description: 'Sessions: log in, refresh, log out, and the public keys that verify ID tokens.' },
        { name: 'cards', description: 'Virtual cards.' },
        { name: 'events', description: 'What happened to the cards: read back here, and delivered to webhook endpoints (see webhooks).' },
      ],
      components: {
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'JWT',
            description: 'The accessToken of login or refresh, as `Authorization: Bearer <accessToken>`. Never in the URL.',
          },
          webhookSignature: {
            type: 'apiKey',
            in: 'header',
            name: 'webhook-signature',
            description: "How a receiver authenticates the gateway's webhooks: the Standard Webhooks signature, made with the endpoint's `whsec_` secret.",
          },
        },
      },
    },
    // Shared schemas are named after their $id (ErrorEnvelope), not `def-0`.
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json['$id'] === 'string' ? json['$id'] : `def-${i}`) },
    transformObject: (documentObject) =>
      ({ ...decorateOpenApi((documentObject as { openapiObject: Document }).openapiObject), webhooks: eventWebhooks() }) as ReturnType<
        NonNullable<FastifyDynamicSwaggerOptions['transformObject']>
      >,
  };
}
