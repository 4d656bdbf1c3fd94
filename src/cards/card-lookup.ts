import type { Credential } from '../config/credentials-file.js';
import { ConnectorError, type ConnectorCardRecord } from '../connector/connector-port.js';
import { maskedCardRecord } from '../connector/masked-card-record.js';
import { errors, GatewayError } from '../foundation/errors.js';
import type { CardOperationName, ConnectorOperation } from '../observability/metrics.js';
import type { Outcomes, RequestContext } from '../observability/outcomes.js';
import { missingPermission, type PermissionNeed } from './card-access.js';
import { connectorAnswer } from './card-errors.js';
import type { CardRecord } from './card-lifecycle-schemas.js';
import type { CardSecrets } from './card-sealing.js';

/**
 * What reading, listing and changing a card share: the timed connector call, the ownership
 * check of every record the connector answers, and the answer's shape.
 */

type LifecycleCall = Exclude<ConnectorOperation, 'create'>;

/**
 * A card id the connector could have issued: the URL-safe characters, at most the contract's 128.
 * Anything else is answered like an unknown id without asking the connector: the caller wrote
 * it, so skipping the call tells them nothing about any card.
 */
const WELL_FORMED_CARD_ID = /^[A-Za-z0-9._:~-]{1,128}$/;
export const isWellFormedCardId = (cardId: string): boolean => WELL_FORMED_CARD_ID.test(cardId);

/** Refuses (403) a credential that lacks one of `needs`; the route checked the same list before the body. */
export function requirePermissions(credential: Credential, needs: readonly PermissionNeed[]): void {
  const missing = missingPermission(credential, needs);
  if (missing) throw errors.permissionDenied(missing.refusal);
}

/** One connector call, counted once with its duration under its operation; rejects with the port's ConnectorError only. */
export async function timedCall<T>(outcomes: Outcomes, operation: LifecycleCall, call: () => Promise<T>): Promise<T> {
  const started = performance.now();
  try {
    const result = await call();
    outcomes.connectorCalled('ok', (performance.now() - started) / 1000, operation);
    return result;
  } catch (error) {
    const failure = error instanceof ConnectorError ? error : new ConnectorError('error', { cause: error });
    outcomes.connectorCalled(failure.kind, (performance.now() - started) / 1000, operation);
    throw failure;
  }
}

/**
 * The record when it names the caller's issuing account; otherwise undefined, logged and
 * counted: a connector bug must never show one account's card to another (it is answered as
 * not found).
 */
export function ownRecord(
  outcomes: Outcomes,
  record: ConnectorCardRecord,
  issuingAccount: string,
  operation: LifecycleCall,
  context: RequestContext,
): ConnectorCardRecord | undefined {
  if (record.issuingAccount === issuingAccount) return record;
  outcomes.record(
    { name: 'card.foreign_record', operation, cardId: record.cardId, expectedAccount: issuingAccount, namedAccount: record.issuingAccount },
    context,
  );
  return undefined;
}

/**
 * Runs a card operation and counts what it came to: a connector failure becomes the 502/504 of
 * creation (D19), a catalogue error is counted under its code; `ok` is counted by the caller
 * (it knows whether a status changed). A refusal of the card or the cursor the client named is
 * audited too, with the id as sent, in the per-credential summaries (D60).
 */
export async function counted<T>(
  outcomes: Outcomes,
  operation: CardOperationName,
  context: RequestContext & { credential: Credential; cardId?: string },
  run: () => Promise<T>,
): Promise<T> {
  try {
    return await run();
  } catch (error) {
    const answered = error instanceof ConnectorError ? connectorAnswer(error) : error;
    if (answered instanceof GatewayError) {
      const code = answered.code;
      if (code === 'card_not_found' || code === 'card_canceled' || code === 'invalid_cursor') {
        outcomes.record({ name: 'card.operation', operation, result: code }, context);
        outcomes.record({ name: 'card.refused', credential: context.credential.id, reason: code, cardId: context.cardId }, context);
      } else if (code === 'connector_unavailable' || code === 'connector_invalid_answer' || code === 'connector_timeout') {
        outcomes.record({ name: 'card.operation', operation, result: code }, context);
      }
    }
    throw answered;
  }
}

/** The answer of a lifecycle call (D43): masked unless `revealed` (card-access.ts decides who may). */
export function cardRecordAnswer(record: ConnectorCardRecord, revealed?: CardSecrets): CardRecord {
  const masked = maskedCardRecord(record);
  return revealed ? { ...masked, pan: revealed.pan, cvc: revealed.cvc } : masked;
}
