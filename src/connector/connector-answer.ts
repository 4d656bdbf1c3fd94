import { Type, type Static } from '@sinclair/typebox';
import { Ajv } from 'ajv';

/** The card record the connector contract promises (decisions.md, "The processor-connector contract"). */
export const ConnectorCardSchema = Type.Object({
  cardId: Type.String({ minLength: 1, maxLength: 128 }),
  pan: Type.String({ pattern: '^[0-9]{12,19}$' }),
  cvc: Type.String({ pattern: '^[0-9]{3,4}$' }),
  expMonth: Type.Integer({ minimum: 1, maximum: 12 }),
  expYear: Type.Integer({ minimum: 2000, maximum: 2199 }),
  status: Type.Union([Type.Literal('active'), Type.Literal('canceled'), Type.Literal('inactive')]),
  cardLimit: Type.Integer({ minimum: 1 }),
  currency: Type.String({ pattern: '^[A-Z]{3}$' }),
  createdAt: Type.String({ minLength: 20, maxLength: 40, pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?Z$' }),
});
export type ConnectorCard = Static<typeof ConnectorCardSchema>;

const validate = new Ajv({ allErrors: false, strict: false }).compile<ConnectorCard>(ConnectorCardSchema);

/**
 * Parses and checks a connector answer body; undefined when it is not a valid card record, or
 * not the card that was asked for (D19: such an answer is a 502, never passed on).
 */
export function parseConnectorCard(text: string, expected: { cardLimit: number; currency: string }): ConnectorCard | undefined {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!validate(data)) return undefined;
  if (data.cardLimit !== expected.cardLimit || data.currency !== expected.currency) return undefined;
  return data;
}
