import type { Logger } from 'pino';
import type { ErrorCode } from '../foundation/error-catalogue.js';
import type { AuditSink, CardRefusalReason, DenialReason } from './audit.js';
import type { CardStatus } from '../foundation/card-status.js';
import type { CardOperationName, CardOperationResult, ConnectorCallResult, ConnectorOperation, GatewayMetrics } from './metrics.js';

/** Who a request came from, as every audit line and most outcomes carry it. */
export interface RequestContext {
  readonly correlationId: string;
  readonly clientAddress: string;
  /** `METHOD /path/template` of the route, where an outcome names it (refusals of card routes, D60). */
  readonly route?: string | undefined;
}

export type LoginFailure = 'unknown_username' | 'wrong_password' | 'inactive' | 'address';
export type RefreshFailure = 'unknown' | 'mismatch' | 'revoked' | 'ended' | 'expired';
/**
 * Refusals of an authenticated credential: audited one line each (D21). Each is named by the
 * error code it answers (`token_revoked`: D41), except the causes told apart from a code's main
 * one: `unknown_credential` (answered `token_invalid`), `address` (outside the credential's
 * ranges) and `reveal_not_creator` (both answered `permission_denied`).
 */
export type CredentialDenial =
  Extract<ErrorCode, 'credential_inactive' | 'permission_denied' | 'token_revoked'> | 'unknown_credential' | 'address' | 'reveal_not_creator';
/** Why a credential's sessions ended (D41). */
export type SessionsEndedCause = 'deactivated' | 'password_changed';
/**
 * Refusals before a credential is known: counted, and audited in per-minute summaries (D25, D34).
 * `address_malformed` (a forwarded address that does not parse) is answered `address_not_allowed`.
 */
export type EdgeRefusal = DenialReason | Extract<ErrorCode, 'https_required'> | 'address_malformed';

interface CardIds {
  credential: string;
  requestId: string;
  cardId: string;
}

/**
 * Everything the gateway counts and audits, named once. A use case reports what happened with
 * one `record` call; this module alone knows which metric and which audit line that means, so a
 * metric and its audit event cannot drift apart, and services stay free of both.
 */
export type Outcome =
  | { name: 'login.succeeded'; credential: string }
  | { name: 'login.failed'; credential: string | undefined; reason: LoginFailure }
  | { name: 'login.lockout_started'; credential: string | undefined }
  | { name: 'login.locked_out' }
  | { name: 'login.rate_limited'; limiter: 'login' | 'login_address' }
  | { name: 'login.busy' }
  | { name: 'refresh.succeeded'; credential: string }
  | { name: 'refresh.failed'; credential: string; reason: RefreshFailure }
  | { name: 'refresh.rate_limited'; credential: string }
  | { name: 'refresh.reuse_detected'; credential: string; during: 'refresh' | 'logout' }
  | { name: 'logout.succeeded'; credential: string }
  | { name: 'logout.failed'; credential: string; reason: string }
  | { name: 'access.denied'; credential: string | undefined; reason: CredentialDenial; requestId?: string; cardId?: string }
  | { name: 'edge.refused'; reason: EdgeRefusal }
  | ({ name: 'card.created'; connectorReplay: boolean } & CardIds)
  | ({ name: 'card.replayed'; payloadMismatch: boolean } & CardIds)
  | ({ name: 'card.revealed' } & CardIds)
  | { name: 'card.failed'; credential: string; requestId: string; reason: string }
  | { name: 'card.in_progress' }
  | { name: 'card.duplicate_joined' }
  | { name: 'card.duplicate_left' }
  | { name: 'card.duplicate_refused' }
  | { name: 'card.record_deferred'; cardId: string; reason: string }
  | { name: 'card.operation'; operation: CardOperationName; result: CardOperationResult }
  | {
      /** A status change the connector answered (D57): `changed` false when the card already had `to`. */
      name: 'card.status_change';
      credential: string;
      cardId: string;
      from: CardStatus;
      to: CardStatus;
      changed: boolean;
      /** The client's reason (one holding a card number was refused; the audit line masks any anyway, D58). */
      reason: string | undefined;
    }
  | { name: 'card.rate_limited'; credential: string; limiter: 'card_read' | 'card_status' }
  /** A card route refused an authenticated credential (D60): audited in per-credential, per-minute summaries. */
  | { name: 'card.refused'; credential: string; reason: CardRefusalReason; cardId: string | undefined }
  | { name: 'card.foreign_record'; operation: Exclude<ConnectorOperation, 'create'>; cardId: string; expectedAccount: string; namedAccount: string }
  | { name: 'config.reloaded' }
  | { name: 'config.reload_failed' }
  | { name: 'credential.sessions_ended'; credential: string; cause: SessionsEndedCause }
  /** An operator made webhook deliveries due again (D65): one event's, or (eventId absent) every failed one of the endpoint. */
  | { name: 'event.redelivered'; endpointId: string; eventId: string | undefined; redelivered: number };

const TOKEN_REFUSALS: ReadonlySet<EdgeRefusal> = new Set(['token_missing', 'token_malformed', 'token_invalid', 'token_expired', 'token_in_url']);

/** What the services and guards depend on: one call per outcome (a test can pass a recorder of its own). */
export interface Outcomes {
  record(outcome: Outcome, context: RequestContext): void;
  /**
   * One call to the connector, whatever it came to: `ok` or the port's failure kind, and how
   * long it took. Per call, not per request (the duplicates waiting on one forward share it),
   * so it carries no request context. `operation` is the call (creation unless said).
   */
  connectorCalled(result: ConnectorCallResult, seconds: number, operation?: ConnectorOperation): void;
}

/**
 * The connector metrics' series of one call and result, looked up once: prom-client would
 * otherwise hash a label set on every observation of every card.
 */
interface ConnectorSeries {
  duration: { observe(value: number): void };
  call: { observe(value: number): void };
  error: { inc(): void };
}

export class OutcomeRecorder implements Outcomes {
  constructor(
    private readonly metrics: GatewayMetrics,
    private readonly audit: AuditSink,
    /** For the outcomes an operator must read about, not count: a card whose record waits for the store. */
    private readonly logger: Logger,
  ) {}

  record(outcome: Outcome, context: RequestContext): void {
    const { metrics, audit } = this;
    const base = { correlationId: context.correlationId, clientAddress: context.clientAddress };
    switch (outcome.name) {
      case 'login.succeeded':
        metrics.logins.inc({ outcome: 'succeeded' });
        audit.record({ ...base, event: 'login.succeeded', outcome: 'success', credential: outcome.credential });
        return;
      case 'login.failed':
        metrics.logins.inc({ outcome: 'failed' });
        if (outcome.reason === 'address') metrics.accessDenied.inc({ reason: 'address' });
        audit.record({ ...base, event: 'login.failed', outcome: 'failure', credential: outcome.credential, reason: outcome.reason });
        return;
      case 'login.lockout_started':
        audit.record({ ...base, event: 'login.locked_out', outcome: 'denied', credential: outcome.credential, reason: 'lockout_started' });
        return;
      case 'login.locked_out':
        metrics.logins.inc({ outcome: 'locked_out' });
        metrics.rateLimited.inc({ limiter: 'login_lockout' });
        audit.record({ ...base, event: 'login.locked_out', outcome: 'denied', reason: 'lockout' });
        return;
      case 'login.rate_limited':
        metrics.logins.inc({ outcome: 'rate_limited' });
        metrics.rateLimited.inc({ limiter: outcome.limiter });
        audit.record({ ...base, event: 'login.rate_limited', outcome: 'denied', reason: 'rate_limit' });
        return;
      case 'login.busy':
        metrics.passwordHashBusy.inc();
        return;
      case 'refresh.succeeded':
        metrics.refreshes.inc({ outcome: 'succeeded' });
        audit.record({ ...base, event: 'refresh.succeeded', outcome: 'success', credential: outcome.credential });
        return;
      case 'refresh.failed':
        metrics.refreshes.inc({ outcome: outcome.reason });
        audit.record({ ...base, event: 'refresh.failed', outcome: 'failure', credential: outcome.credential, reason: outcome.reason });
        return;
      case 'refresh.rate_limited':
        metrics.refreshes.inc({ outcome: 'rate_limited' });
        metrics.rateLimited.inc({ limiter: 'refresh' });
        audit.record({ ...base, event: 'refresh.rate_limited', outcome: 'denied', credential: outcome.credential, reason: 'rate_limit' });
        return;
      case 'refresh.reuse_detected':
        if (outcome.during === 'refresh') metrics.refreshes.inc({ outcome: 'reuse' });
        metrics.reuseDetected.inc();
        audit.record({ ...base, event: 'refresh.reuse_detected', outcome: 'denied', credential: outcome.credential, reason: 'family_revoked' });
        return;
      case 'logout.succeeded':
        metrics.logouts.inc({ outcome: 'succeeded' });
        audit.record({ ...base, event: 'logout', outcome: 'success', credential: outcome.credential });
        return;
      case 'logout.failed':
        metrics.logouts.inc({ outcome: 'failed' });
        audit.record({ ...base, event: 'logout', outcome: 'failure', credential: outcome.credential, reason: outcome.reason });
        return;
      case 'access.denied':
        metrics.accessDenied.inc({ reason: outcome.reason });
        audit.record({
          ...base,
          event: 'access.denied',
          outcome: 'denied',
          credential: outcome.credential,
          reason: outcome.reason,
          requestId: outcome.requestId,
          cardId: outcome.cardId,
        });
        return;
      case 'edge.refused':
        metrics.accessDenied.inc({ reason: outcome.reason });
        if (TOKEN_REFUSALS.has(outcome.reason)) metrics.tokenFailures.inc({ reason: outcome.reason });
        // Plain HTTP is refused without being audited: it never reaches anything worth a line.
        if (outcome.reason === 'address_malformed') audit.deny('address_not_allowed', context.clientAddress, context.correlationId);
        else if (outcome.reason !== 'https_required') audit.deny(outcome.reason, context.clientAddress, context.correlationId);
        return;
      case 'card.created':
        metrics.cardsCreated.inc();
        audit.record({
          ...base,
          event: 'card.created',
          outcome: 'success',
          credential: outcome.credential,
          requestId: outcome.requestId,
          cardId: outcome.cardId,
          reason: outcome.connectorReplay ? 'connector_replay' : undefined,
        });
        return;
      case 'card.replayed':
        metrics.cardReplays.inc();
        if (outcome.payloadMismatch) metrics.idempotencyPayloadMismatches.inc();
        audit.record({
          ...base,
          event: 'card.replayed',
          outcome: 'success',
          credential: outcome.credential,
          requestId: outcome.requestId,
          cardId: outcome.cardId,
        });
        return;
      case 'card.revealed':
        metrics.cardReveals.inc();
        audit.record({
          ...base,
          event: 'card.revealed',
          outcome: 'success',
          credential: outcome.credential,
          requestId: outcome.requestId,
          cardId: outcome.cardId,
        });
        return;
      case 'card.failed':
        audit.record({
          ...base,
          event: 'card.failed',
          outcome: 'failure',
          credential: outcome.credential,
          requestId: outcome.requestId,
          reason: outcome.reason,
        });
        return;
      case 'card.in_progress':
        metrics.idempotencyConflicts.inc();
        return;
      case 'card.duplicate_joined':
        metrics.idempotencyWaiters.inc();
        return;
      case 'card.duplicate_left':
        metrics.idempotencyWaiters.dec();
        return;
      case 'card.duplicate_refused':
        metrics.idempotencyWaitersRefused.inc();
        return;
      case 'card.record_deferred':
        // The card exists and went to the client; a retry before the record is written reaches
        // the connector under the same Idempotency-Key and gets this card back (D31).
        this.logger.warn(
          { reason: outcome.reason, cardId: outcome.cardId, correlationId: context.correlationId },
          'card created; its idempotency record is written when the store answers again',
        );
        return;
      case 'card.operation':
        metrics.cardOperations.inc({ operation: outcome.operation, outcome: outcome.result });
        return;
      case 'card.status_change':
        // D56, D57: a request that changed nothing is audited too, under its own name.
        metrics.cardOperations.inc({ operation: 'status_change', outcome: outcome.changed ? 'changed' : 'unchanged' });
        audit.record({
          ...base,
          event: outcome.changed ? 'card.status_changed' : 'card.status_change_requested',
          outcome: 'success',
          credential: outcome.credential,
          cardId: outcome.cardId,
          from: outcome.from,
          to: outcome.to,
          changed: outcome.changed,
          reason: outcome.reason,
        });
        return;
      case 'card.rate_limited':
        metrics.rateLimited.inc({ limiter: outcome.limiter });
        audit.record({ ...base, event: 'card.rate_limited', outcome: 'denied', credential: outcome.credential, reason: 'rate_limit' });
        return;
      case 'card.refused':
        // Counted where the refusal's own metric is (card operations, access denied); audited in
        // summaries with the id as the client sent it, so probing leaves a trail (D60).
        if (outcome.reason === 'permission_denied') metrics.accessDenied.inc({ reason: 'permission_denied' });
        audit.refuse({
          credential: outcome.credential,
          reason: outcome.reason,
          route: context.route ?? 'unknown',
          cardId: outcome.cardId,
          correlationId: context.correlationId,
          clientAddress: context.clientAddress,
        });
        return;
      case 'card.foreign_record':
        // A connector bug that would show one account's card to another: answered as not found,
        // counted, and logged for the operator (ids and accounts only, never card data).
        metrics.connectorForeignRecords.inc({ operation: outcome.operation });
        this.logger.error(
          {
            operation: outcome.operation,
            cardId: outcome.cardId,
            expectedAccount: outcome.expectedAccount,
            namedAccount: outcome.namedAccount,
            correlationId: context.correlationId,
          },
          'connector answered a card record of another issuing account; answered as not found',
        );
        return;
      case 'config.reloaded':
        metrics.configReloads.inc({ outcome: 'success' });
        audit.record({ ...base, event: 'config.reloaded', outcome: 'success' });
        return;
      case 'config.reload_failed':
        metrics.configReloads.inc({ outcome: 'failure' });
        audit.record({ ...base, event: 'config.reload_failed', outcome: 'failure' });
        return;
      case 'credential.sessions_ended':
        audit.record({ ...base, event: 'credential.sessions_ended', outcome: 'success', credential: outcome.credential, reason: outcome.cause });
        return;
      case 'event.redelivered':
        audit.record({
          ...base,
          event: 'event.redelivered',
          outcome: 'success',
          endpointId: outcome.endpointId,
          eventId: outcome.eventId,
          redelivered: outcome.redelivered,
        });
        return;
    }
  }

  connectorCalled(result: ConnectorCallResult, seconds: number, operation: ConnectorOperation = 'create'): void {
    const series = this.#connectorSeries(result, operation);
    series.duration.observe(seconds);
    series.call.observe(seconds);
    // The alerts divide these by the calls, per operation (D60). A connector's "not found" is an
    // answer (ok), whatever 4xx said it.
    if (result !== 'ok') series.error.inc();
  }

  readonly #connector = new Map<string, ConnectorSeries>();

  #connectorSeries(result: ConnectorCallResult, operation: ConnectorOperation): ConnectorSeries {
    const key = `${operation} ${result}`;
    let series = this.#connector.get(key);
    if (series === undefined) {
      const { metrics } = this;
      series = {
        duration: metrics.connectorDuration.labels({ outcome: result, operation }),
        call: metrics.connectorCallDuration.labels({ operation }),
        // Made on the first failure only: a series at 0 is made by the metrics' own start.
        get error() {
          return metrics.connectorErrors.labels({ kind: result, operation });
        },
      };
      this.#connector.set(key, series);
    }
    return series;
  }
}
