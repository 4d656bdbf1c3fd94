import { Ajv } from 'ajv';
import { CARD_STATUSES, type CardStatus } from '../../foundation/card-status.js';
import {
  CONNECTOR_LIST_BOUNDS,
  ConnectorStatusChangeSchema,
  describeContractError,
  UTC_INSTANT_PATTERN,
  type ConnectorStatusChange,
} from '../connector-contract.js';
import type { PageFilter } from './card-book.js';
import { decodeCursor } from './list-cursor.js';
import { BadRequest } from './sandbox-types.js';

/**
 * The lifecycle calls' inputs, each checked with a 400 naming what is wrong. Queries are read
 * here rather than by a route schema, because Fastify's validator drops unknown members and
 * coerces `1.5` or `1e2` where the contract wants them refused.
 */

// No removeAdditional: a member outside the contract is refused, not dropped.
const isStatusChange = new Ajv({ allErrors: false, strict: false }).compile<ConnectorStatusChange>(ConnectorStatusChangeSchema);
const INSTANT = new RegExp(UTC_INSTANT_PATTERN);
const LIMIT = /^[1-9]\d{0,2}$/;

type Query = Record<string, unknown>;

function readQuery(query: unknown, allowed: readonly string[]): Record<string, string> {
  const values: Record<string, string> = {};
  for (const [name, value] of Object.entries((query ?? {}) as Query)) {
    if (!allowed.includes(name)) throw new BadRequest(`unknown query parameter ${name}`);
    if (typeof value !== 'string') throw new BadRequest(`${name} must be given once`);
    values[name] = value;
  }
  return values;
}

function issuingAccountOf(values: Record<string, string>): string {
  const account = values['issuingAccount'];
  if (account === undefined || account === '' || account.length > 128) throw new BadRequest('issuingAccount is required (1 to 128 characters)');
  return account;
}

/** An instant as epoch milliseconds, and whether it carries digits below the millisecond. */
function instant(name: string, text: string): { ms: number; fraction: string } {
  const ms = INSTANT.test(text) ? Date.parse(text) : Number.NaN;
  // Date.parse rolls 2026-02-30 over to March: only a date that reads back the same is real.
  if (Number.isNaN(ms) || new Date(ms).toISOString().slice(0, 19) !== text.slice(0, 19)) {
    throw new BadRequest(`${name} must be an ISO 8601 UTC instant like 2026-01-31T23:59:59Z`);
  }
  const fraction = (/\.(\d+)Z$/.exec(text)?.[1] ?? '').padEnd(9, '0');
  return { ms, fraction };
}

/** `GET /v1/cards/{cardId}`: the account, nothing else. */
export function parseCardQuery(query: unknown): string {
  return issuingAccountOf(readQuery(query, ['issuingAccount']));
}

/** `GET /v1/cards`: the account and the page's selection. */
export function parseListQuery(query: unknown): { issuingAccount: string; filter: PageFilter } {
  const values = readQuery(query, ['issuingAccount', 'limit', 'cursor', 'status', 'createdAfter', 'createdBefore']);
  const issuingAccount = issuingAccountOf(values);
  const { limit: limitText, cursor, status, createdAfter, createdBefore } = values;
  let limit: number = CONNECTOR_LIST_BOUNDS.defaultLimit;
  if (limitText !== undefined) {
    limit = LIMIT.test(limitText) ? Number(limitText) : 0;
    if (limit < CONNECTOR_LIST_BOUNDS.minLimit || limit > CONNECTOR_LIST_BOUNDS.maxLimit) {
      throw new BadRequest(`limit must be an integer from ${CONNECTOR_LIST_BOUNDS.minLimit} to ${CONNECTOR_LIST_BOUNDS.maxLimit}`);
    }
  }
  const filter: PageFilter = { limit };
  if (cursor !== undefined) {
    const before = decodeCursor(cursor);
    if (!before) throw new BadRequest('cursor is not a cursor of this connector');
    filter.before = before;
  }
  if (status !== undefined) {
    if (!(CARD_STATUSES as readonly string[]).includes(status)) throw new BadRequest(`status must be one of ${CARD_STATUSES.join(', ')}`);
    filter.status = status as CardStatus;
  }
  const after = createdAfter === undefined ? undefined : instant('createdAfter', createdAfter);
  const before = createdBefore === undefined ? undefined : instant('createdBefore', createdBefore);
  if (after && before && (after.ms > before.ms || (after.ms === before.ms && after.fraction > before.fraction))) {
    throw new BadRequest('createdAfter must not be later than createdBefore');
  }
  // Both bounds are inclusive (D61) and cards carry whole milliseconds: "at or after t" starts at
  // t's millisecond, or the next one when t has digits below the millisecond; "at or before t"
  // ends at t's millisecond (a card of that millisecond is not later than t).
  if (after) filter.createdAfterMs = after.ms + (/^0+$/.test(after.fraction.slice(3)) ? 0 : 1);
  if (before) filter.createdBeforeMs = before.ms;
  return { issuingAccount, filter };
}

/** `POST /v1/cards/{cardId}/status`: account, status and an optional reason, nothing else. */
export function parseStatusChange(body: unknown): ConnectorStatusChange {
  if (!isStatusChange(body)) throw new BadRequest(describeContractError(isStatusChange.errors));
  return body;
}
