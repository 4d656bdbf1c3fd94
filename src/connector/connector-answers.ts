import { Ajv } from 'ajv';
import {
  CONNECTOR_CARD_CANCELED,
  ConnectorCardPageSchema,
  ConnectorCardRecordSchema,
  type ConnectorCardPage,
  type ConnectorCardRecord,
} from './connector-contract.js';

/**
 * The lifecycle answers' shapes (D43-D45), checked strictly: a record or page that does not
 * match is undefined here and a 502 `invalid_answer` to the client, never passed on. Whether a
 * record names the caller's account is the card use case's check, not this module's.
 */

const ajv = new Ajv({ allErrors: false, strict: false });
const isRecord = ajv.compile<ConnectorCardRecord>(ConnectorCardRecordSchema);
const isPage = ajv.compile<ConnectorCardPage>(ConnectorCardPageSchema);

function json(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The record of one card, only when it is the card asked for (a connector mixing ids up is broken). */
export function parseCardRecord(text: string, cardId: string): ConnectorCardRecord | undefined {
  const data = json(text);
  return isRecord(data) && data.cardId === cardId ? data : undefined;
}

/** A whole page or nothing: one bad record, or more records than asked for, rejects the page. */
export function parseCardPage(text: string, limit: number): ConnectorCardPage | undefined {
  const data = json(text);
  return isPage(data) && data.data.length <= limit ? data : undefined;
}

/** True for the contract's 409 of a canceled card; another 409 is a plain failure. */
export function isCardCanceledAnswer(text: string): boolean {
  const data = json(text);
  return typeof data === 'object' && data !== null && (data as { code?: unknown }).code === CONNECTOR_CARD_CANCELED;
}
