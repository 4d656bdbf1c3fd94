import type { Credential } from '../config/credentials-file.js';
import type { ConnectorListQuery } from '../connector/connector-port.js';
import { errors, type FieldProblem } from '../foundation/errors.js';
import type { RequestContext } from '../observability/outcomes.js';
import { cardPermissions } from './card-access.js';
import type { CursorBinding } from './card-cursor.js';
import { LIST_LIMIT, type CardListQuery, type CardPage } from './card-lifecycle-schemas.js';
import { cardRecordAnswer, counted, ownRecord, requirePermissions, timedCall } from './card-lookup.js';
import type { CardPorts } from './card-ports.js';
import { isCalendarValid } from './validate-card-request.js';

export interface ListCardsInput extends RequestContext {
  credential: Credential;
  query: CardListQuery;
}

export type ListCards = (input: ListCardsInput) => Promise<CardPage>;

/** One spelling per instant (milliseconds, `Z`): the connector's filter and the cursor's binding agree. */
const instant = (text: string | undefined): string | undefined => (text === undefined ? undefined : new Date(Date.parse(text)).toISOString());

/** The D44 rules a schema cannot say: real calendar instants, createdAfter not later than createdBefore (event listings share them). */
export function filterProblems(query: { readonly createdAfter?: string | undefined; readonly createdBefore?: string | undefined }): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const { createdAfter, createdBefore } = query;
  const afterValid = createdAfter === undefined || isCalendarValid(createdAfter);
  const beforeValid = createdBefore === undefined || isCalendarValid(createdBefore);
  if (!afterValid) problems.push({ path: 'query.createdAfter', message: 'is not a valid date and time' });
  if (!beforeValid) problems.push({ path: 'query.createdBefore', message: 'is not a valid date and time' });
  if (afterValid && beforeValid && createdAfter !== undefined && createdBefore !== undefined && Date.parse(createdAfter) > Date.parse(createdBefore))
    problems.push({ path: 'query.createdAfter', message: 'must not be later than createdBefore' });
  return problems;
}

/**
 * Listing the caller's issuing account's cards (D44): `cards:read`, newest first, every card
 * masked, one connector page per request (never a partial list: a failed call is the 502/504 of
 * creation). The connector's cursor is sealed for the client (card-cursor.ts); a cursor that
 * does not open for this account and these filters is 400 invalid_cursor before any connector
 * call. A record naming another account is left out, logged and counted.
 */
export function cardListing(ports: CardPorts): ListCards {
  const { connector, outcomes, cursors } = ports;

  return async function listCards(input) {
    const { credential, query } = input;
    requirePermissions(credential, cardPermissions('list', false));
    const problems = filterProblems(query);
    if (problems.length > 0) throw errors.validation(problems);
    return counted(outcomes, 'list', input, async () => {
      const binding: CursorBinding = {
        issuingAccount: credential.issuingAccount,
        status: query.status,
        createdAfter: instant(query.createdAfter),
        createdBefore: instant(query.createdBefore),
      };
      let connectorCursor: string | undefined;
      if (query.cursor !== undefined) {
        connectorCursor = cursors.open(query.cursor, binding);
        if (connectorCursor === undefined) throw errors.invalidCursor();
      }
      const request: ConnectorListQuery = {
        issuingAccount: credential.issuingAccount,
        limit: query.limit ?? LIST_LIMIT.default,
        ...(connectorCursor !== undefined && { cursor: connectorCursor }),
        ...(binding.status !== undefined && { status: binding.status }),
        ...(binding.createdAfter !== undefined && { createdAfter: binding.createdAfter }),
        ...(binding.createdBefore !== undefined && { createdBefore: binding.createdBefore }),
      };
      const page = await timedCall(outcomes, 'list', () => connector.listCards(request, { correlationId: input.correlationId }));
      const data = [];
      for (const record of page.data) {
        if (ownRecord(outcomes, record, credential.issuingAccount, 'list', input)) data.push(cardRecordAnswer(record));
      }
      outcomes.record({ name: 'card.operation', operation: 'list', result: 'ok' }, input);
      return { data, nextCursor: page.nextCursor === null ? null : cursors.seal(page.nextCursor, binding) };
    });
  };
}
