import { Type } from '@sinclair/typebox';

/** The D20 envelope as a response schema: documents every error answer in the OpenAPI file. */
export const ErrorEnvelopeSchema = Type.Object(
  {
    correlationId: Type.String({ format: 'uuid' }),
    status: Type.Integer(),
    message: Type.String(),
    details: Type.Object({}, { additionalProperties: true }),
    timestamp: Type.String({ format: 'date-time' }),
    retryAfter: Type.Optional(Type.Integer({ minimum: 1, description: 'Seconds to wait (429, 409, 503).' })),
  },
  { $id: 'ErrorEnvelope', description: 'Error envelope (spec 7, D20).' },
);

export const errorResponses = (...statuses: number[]) =>
  Object.fromEntries(statuses.map((status) => [status, { $ref: 'ErrorEnvelope#' }]));

export const BearerSecurity = [{ bearerAuth: [] }];
