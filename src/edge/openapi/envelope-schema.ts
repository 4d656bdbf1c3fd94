import { Type } from '@sinclair/typebox';
import { ALL_ERROR_CODES, ERROR_CATALOGUE } from '../../foundation/error-catalogue.js';
import { MAX_LISTED_FIELDS } from '../../foundation/errors.js';

const codeList = ALL_ERROR_CODES.map((code) => `- \`${code}\` (${ERROR_CATALOGUE[code].status}): ${ERROR_CATALOGUE[code].description}`).join('\n');

/** The error envelope as a response schema: every error answer of every operation (D20, D36). */
export const ErrorEnvelopeSchema = Type.Object(
  {
    correlationId: Type.String({ format: 'uuid', description: "The request's id, the same as the X-Correlation-Id header; quote it to support." }),
    status: Type.Integer({ minimum: 400, maximum: 599, description: 'The HTTP status.' }),
    code: Type.String({
      enum: [...ALL_ERROR_CODES],
      description: `Stable machine-readable name of the error: branch on it (messages may be reworded). Every code, with its status:\n\n${codeList}`,
    }),
    message: Type.String({ description: 'Short human text; never parse it. A 5xx never says more than its code.' }),
    details: Type.Object(
      {
        fields: Type.Optional(
          Type.Array(Type.Object({ path: Type.String(), message: Type.String() }), {
            maxItems: MAX_LISTED_FIELDS,
            description: `validation_failed: the fields (or query parameters) that break a rule, at most ${MAX_LISTED_FIELDS}.`,
          }),
        ),
        fieldsOmitted: Type.Optional(Type.Integer({ minimum: 1, description: `Field problems found beyond the ${MAX_LISTED_FIELDS} listed.` })),
      },
      { additionalProperties: true, description: 'Empty ({}) except for validation_failed.' },
    ),
    timestamp: Type.String({ format: 'date-time', description: 'ISO 8601 UTC instant.' }),
    retryAfter: Type.Optional(Type.Integer({ minimum: 1, description: 'Seconds to wait before retrying, as in Retry-After (409, 429 and 503 answers only).' })),
  },
  { $id: 'ErrorEnvelope', title: 'ErrorEnvelope', description: 'Every error answer, whatever produced it.' },
);
