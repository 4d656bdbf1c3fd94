import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { EventSource, EventType } from '../foundation/event-types.js';

export const CONNECTOR_EVENT_OUTCOMES = ['recorded', 'repeat', 'invalid', 'unauthenticated', 'unavailable'] as const;
/** What became of one event the connector posted (D64). */
export type ConnectorEventOutcome = (typeof CONNECTOR_EVENT_OUTCOMES)[number];

export const DELIVERY_OUTCOMES = ['delivered', 'retry', 'failed', 'gone', 'refused'] as const;
/** What one webhook delivery attempt came to (D65). */
export type DeliveryOutcome = (typeof DELIVERY_OUTCOMES)[number];

/** The (type, source) pairs that can happen: their series exist at 0 from the start. */
const RECORDED_KNOWN: readonly { type: EventType; source: EventSource }[] = [
  { type: 'card.created', source: 'api' },
  { type: 'card.status_changed', source: 'api' },
  { type: 'card.status_changed', source: 'processor' },
  { type: 'transaction.authorized', source: 'processor' },
  { type: 'transaction.declined', source: 'processor' },
  { type: 'transaction.cleared', source: 'processor' },
  { type: 'transaction.reversed', source: 'processor' },
];

/**
 * The event metrics (D63-D65), on the gateway's registry. The `endpoint` label is the endpoint's
 * configured id: an operator's name, never its URL (which may carry a token).
 */
export class EventMetrics {
  readonly recorded: Counter<'type' | 'source'>;
  readonly connectorEvents: Counter<'outcome'>;
  readonly deliveries: Counter<'endpoint' | 'outcome'>;
  readonly deliveryDuration: Histogram<'endpoint'>;
  readonly backlog: Gauge<'endpoint'>;
  readonly failedDeliveries: Gauge<'endpoint'>;
  readonly oldestPendingAge: Gauge<'endpoint'>;
  readonly endpointStopped: Gauge<'endpoint'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.recorded = new Counter({
      name: 'gateway_events_recorded_total',
      help: 'Events recorded, by type and source (api: the gateway, processor: the connector) (D63, D64).',
      labelNames: ['type', 'source'],
      registers,
    });
    for (const labels of RECORDED_KNOWN) this.recorded.inc(labels, 0);
    this.connectorEvents = new Counter({
      name: 'gateway_connector_events_total',
      help: 'Events posted by the connector to the connector listener, by outcome (D64).',
      labelNames: ['outcome'],
      registers,
    });
    for (const outcome of CONNECTOR_EVENT_OUTCOMES) this.connectorEvents.inc({ outcome }, 0);
    this.deliveries = new Counter({
      name: 'gateway_event_deliveries_total',
      help: 'Webhook delivery attempts, by endpoint and outcome (gone: the endpoint answered 410; refused: the egress guard refused its address) (D65).',
      labelNames: ['endpoint', 'outcome'],
      registers,
    });
    this.deliveryDuration = new Histogram({
      name: 'gateway_event_delivery_duration_seconds',
      help: 'Time from sending a webhook delivery to its answer (D65).',
      labelNames: ['endpoint'],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.backlog = new Gauge({
      name: 'gateway_event_backlog',
      help: 'Pending webhook deliveries of the endpoint, due or waiting for a retry (D65).',
      labelNames: ['endpoint'],
      registers,
    });
    this.failedDeliveries = new Gauge({
      name: 'gateway_event_failed_deliveries',
      help: 'Webhook deliveries of the endpoint that failed every retry and are kept for redelivery (D65).',
      labelNames: ['endpoint'],
      registers,
    });
    this.oldestPendingAge = new Gauge({
      name: 'gateway_event_oldest_pending_age_seconds',
      help: 'Age of the oldest due webhook delivery of the endpoint (0: none due) (D65).',
      labelNames: ['endpoint'],
      registers,
    });
    this.endpointStopped = new Gauge({
      name: 'gateway_event_endpoint_stopped',
      help: '1 while deliveries to the endpoint are stopped by a 410 answer, until the next config reload (D65).',
      labelNames: ['endpoint'],
      registers,
    });
  }

  /** Endpoints whose series exist. */
  readonly #endpoints = new Set<string>();

  /** Creates the endpoint's series at 0, so a dashboard sees 0 rather than nothing before its first delivery. */
  endpointConfigured(endpoint: string): void {
    // A reload that keeps the endpoint keeps its gauges' values.
    if (this.#endpoints.has(endpoint)) return;
    this.#endpoints.add(endpoint);
    for (const outcome of DELIVERY_OUTCOMES) this.deliveries.inc({ endpoint, outcome }, 0);
    this.deliveryDuration.zero({ endpoint });
    for (const gauge of this.#gauges()) gauge.set({ endpoint }, 0);
  }

  /** Drops the gauges of an endpoint no longer configured: a stale backlog would keep an alert firing. */
  endpointRemoved(endpoint: string): void {
    if (!this.#endpoints.delete(endpoint)) return;
    for (const gauge of this.#gauges()) gauge.remove({ endpoint });
  }

  #gauges(): Gauge<'endpoint'>[] {
    return [this.backlog, this.failedDeliveries, this.oldestPendingAge, this.endpointStopped];
  }
}
