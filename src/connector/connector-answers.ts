import { Ajv } from 'ajv';
import {
  CONNECTOR_CARD_CANCELED,
  ConnectorCardPageSchema,
  ConnectorCardRecordSchema,
  ConnectorStatusAnswerSchema,
  type ConnectorCardPage,
  type ConnectorCardRecord,
  type ConnectorStatusAnswer,
} from './connector-contract.js';

/**
 * The lifecycle answers' shapes (D43-D45), checked strictly: a record or page that does not
 * match is undefined here and a 502 `invalid_answer` to the client, never passed on. Whether a
 * record names the caller's account is the card use case's check, not this module's.
 */

const ajv = new Ajv({ allErrors: false, strict: false });
const isRecord = ajv.compile<ConnectorCardRecord>(ConnectorCardRecordSchema);
const isPage = ajv.compile<ConnectorCardPage>(ConnectorCardPageSchema);
const isStatusAnswer = ajv.compile<ConnectorStatusAnswer>(ConnectorStatusAnswerSchema);

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

/**
 * The answer of a status change (D57), only when it is the card asked for, now in the status
 * asked for, and says consistently whether this call changed it.
 */
export function parseStatusAnswer(text: string, cardId: string, status: string): ConnectorStatusAnswer | undefined {
  const data = json(text);
  if (!isStatusAnswer(data) || data.cardId !== cardId || data.status !== status) return undefined;
  return data.changed === (data.previousStatus !== data.status) ? data : undefined;
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
