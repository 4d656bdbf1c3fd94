import type { Clock } from '../../foundation/clock.js';
import { GatewayError, errors } from '../../foundation/errors.js';
import type { Outcomes, RequestContext } from '../../observability/outcomes.js';
import type { DeliveryRecord, DeliveryState, EndpointRef, EventStore } from '../../store/event-store.js';
import type { DeliveryEndpoint } from './delivery-loop.js';

/** One endpoint as the admin listener shows it: its URL's host only (a path or query may hold the partner's token). */
export interface EndpointView {
  readonly id: string;
  readonly issuingAccount: string;
  readonly host: string;
  readonly stopped: boolean;
  readonly backlog: { readonly pending: number; readonly failed: number; readonly oldestDueAt?: string };
}

/** One delivery as the admin listener shows it; no body, no secret. */
export interface DeliveryView {
  readonly eventId: string;
  readonly state: DeliveryState;
  readonly attempts: number;
  /** Pending: when it is due next. */
  readonly nextAttemptAt?: string;
  /** Failed: when its last attempt failed. */
  readonly failedAt?: string;
  readonly lastError?: string;
}

export interface RedeliveryAnswer {
  readonly redelivered: number;
  /** The endpoint answered 410 and is stopped on this replica: the deliveries wait until a reload. */
  readonly endpointStopped: boolean;
}

export interface DeliveryAdminDeps {
  readonly store: EventStore;
  readonly endpoints: () => readonly DeliveryEndpoint[];
  readonly loop: { isStopped(endpointId: string): boolean };
  readonly clock: Clock;
  readonly outcomes: Outcomes;
  /** False while audit lines cannot be written: a redelivery, being audited, answers 503 then (D26). */
  readonly auditWritable?: () => boolean;
}

const iso = (ms: number): string => new Date(ms).toISOString();

export function deliveryView(record: DeliveryRecord): DeliveryView {
  return {
    eventId: record.eventId,
    state: record.state,
    attempts: record.attempts,
    ...(record.state === 'pending' ? { nextAttemptAt: iso(record.at) } : { failedAt: iso(record.at) }),
    ...(record.lastError !== undefined && { lastError: record.lastError }),
  };
}

const endpointNotFound = (): GatewayError => new GatewayError('not_found', { message: 'No webhook endpoint has this id' });
const deliveryNotFound = (): GatewayError => new GatewayError('not_found', { message: 'The endpoint has no delivery of this event' });

/**
 * What the admin listener does with webhook deliveries (D65): show the endpoints and their
 * deliveries, and make deliveries due again. An operator's redelivery is audited
 * (`event.redelivered`), like any change made on purpose.
 */
export class DeliveryAdmin {
  constructor(private readonly deps: DeliveryAdminDeps) {}

  async endpoints(): Promise<EndpointView[]> {
    const { store, loop } = this.deps;
    return Promise.all(
      this.deps.endpoints().map(async (endpoint) => {
        const backlog = await store.backlog(refOf(endpoint));
        return {
          id: endpoint.id,
          issuingAccount: endpoint.issuingAccount,
          host: new URL(endpoint.url).host,
          stopped: loop.isStopped(endpoint.id),
          backlog: { pending: backlog.pending, failed: backlog.failed, ...(backlog.oldestDueAt !== undefined && { oldestDueAt: iso(backlog.oldestDueAt) }) },
        };
      }),
    );
  }

  async deliveries(endpointId: string, state: DeliveryState, limit: number): Promise<DeliveryView[]> {
    const records = await this.deps.store.deliveries(this.#ref(endpointId), { state, limit });
    return records.map(deliveryView);
  }

  async delivery(endpointId: string, eventId: string): Promise<DeliveryView> {
    const record = await this.deps.store.delivery(this.#ref(endpointId), eventId);
    if (record === undefined) throw deliveryNotFound();
    return deliveryView(record);
  }

  /** Makes one delivery due now, its attempts starting over; 404 when the endpoint has none of the event. */
  async redeliver(endpointId: string, eventId: string, context: RequestContext): Promise<RedeliveryAnswer> {
    const ref = this.#ref(endpointId);
    this.#auditable();
    const redelivered = await this.deps.store.redeliver(ref, [eventId], this.deps.clock.now());
    if (redelivered === 0) throw deliveryNotFound();
    this.deps.outcomes.record({ name: 'event.redelivered', endpointId, eventId, redelivered }, context);
    return { redelivered, endpointStopped: this.deps.loop.isStopped(endpointId) };
  }

  /** Makes every failed delivery of the endpoint due now. */
  async redeliverFailed(endpointId: string, context: RequestContext): Promise<RedeliveryAnswer> {
    const ref = this.#ref(endpointId);
    this.#auditable();
    const redelivered = await this.deps.store.redeliver(ref, 'all-failed', this.deps.clock.now());
    this.deps.outcomes.record({ name: 'event.redelivered', endpointId, eventId: undefined, redelivered }, context);
    return { redelivered, endpointStopped: this.deps.loop.isStopped(endpointId) };
  }

  #ref(endpointId: string): EndpointRef {
    const endpoint = this.deps.endpoints().find((candidate) => candidate.id === endpointId);
    if (endpoint === undefined) throw endpointNotFound();
    return refOf(endpoint);
  }

  #auditable(): void {
    if (this.deps.auditWritable && !this.deps.auditWritable()) throw errors.auditUnavailable();
  }
}

const refOf = (endpoint: DeliveryEndpoint): EndpointRef => ({ issuingAccount: endpoint.issuingAccount, endpointId: endpoint.id });
