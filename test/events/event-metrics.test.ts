import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { EventMetrics } from '../../src/observability/event-metrics.js';
import { metricSum } from '../support/metrics.js';

/** The design's list, word for word: the docs quote these. */
const EXPECTED = [
  {
    name: 'gateway_events_recorded_total',
    type: 'counter',
    labels: ['type', 'source'],
    help: 'Events recorded, by type and source (api: the gateway, processor: the connector) (D63, D64).',
  },
  {
    name: 'gateway_connector_events_total',
    type: 'counter',
    labels: ['outcome'],
    help: 'Events posted by the connector to the connector listener, by outcome (D64).',
  },
  {
    name: 'gateway_event_deliveries_total',
    type: 'counter',
    labels: ['endpoint', 'outcome'],
    help: 'Webhook delivery attempts, by endpoint and outcome (gone: the endpoint answered 410; refused: the egress guard refused its address) (D65).',
  },
  {
    name: 'gateway_event_delivery_duration_seconds',
    type: 'histogram',
    labels: ['endpoint'],
    help: 'Time from sending a webhook delivery to its answer (D65).',
  },
  {
    name: 'gateway_event_backlog',
    type: 'gauge',
    labels: ['endpoint'],
    help: 'Pending webhook deliveries of the endpoint, due or waiting for a retry (D65).',
  },
  {
    name: 'gateway_event_failed_deliveries',
    type: 'gauge',
    labels: ['endpoint'],
    help: 'Webhook deliveries of the endpoint that failed every retry and are kept for redelivery (D65).',
  },
  {
    name: 'gateway_event_oldest_pending_age_seconds',
    type: 'gauge',
    labels: ['endpoint'],
    help: 'Age of the oldest due webhook delivery of the endpoint (0: none due) (D65).',
  },
  {
    name: 'gateway_event_endpoint_stopped',
    type: 'gauge',
    labels: ['endpoint'],
    help: '1 while deliveries to the endpoint are stopped by a 410 answer, until the next config reload (D65).',
  },
];

describe('the event metrics (D63-D65)', () => {
  it('registers each metric of the design with its name, type, labels and help text, and nothing else', async () => {
    const registry = new Registry();
    new EventMetrics(registry);
    const registered = (await registry.getMetricsAsJSON()).map((metric) => ({
      name: metric.name,
      type: String(metric.type),
      help: metric.help,
    }));
    expect(registered).toEqual(EXPECTED.map(({ name, type, help }) => ({ name, type, help })));
    for (const { name, labels } of EXPECTED) {
      const metric = registry.getSingleMetric(name) as unknown as { labelNames: string[] };
      expect(metric.labelNames, name).toEqual(labels);
    }
  });

  it('exposes the known outcomes and event kinds at 0 from the start', async () => {
    const registry = new Registry();
    new EventMetrics(registry);
    const text = await registry.metrics();
    for (const outcome of ['recorded', 'repeat', 'invalid', 'unauthenticated', 'unavailable'])
      expect(metricSum(text, 'gateway_connector_events_total', { outcome }), outcome).toBe(0);
    expect(metricSum(text, 'gateway_events_recorded_total', { type: 'card.created', source: 'api' })).toBe(0);
    expect(metricSum(text, 'gateway_events_recorded_total', { type: 'transaction.declined', source: 'processor' })).toBe(0);
    expect(metricSum(text, 'gateway_events_recorded_total', { type: 'card.created', source: 'processor' })).toBeUndefined();
  });

  it('creates an endpoint series at 0 when configured, keeps a kept endpoint gauges, and drops a removed one gauges', async () => {
    const registry = new Registry();
    const metrics = new EventMetrics(registry);
    expect(metricSum(await registry.metrics(), 'gateway_event_backlog', { endpoint: 'partner-a' })).toBeUndefined();
    metrics.endpointConfigured('partner-a');
    let text = await registry.metrics();
    for (const outcome of ['delivered', 'retry', 'failed', 'gone', 'refused'])
      expect(metricSum(text, 'gateway_event_deliveries_total', { endpoint: 'partner-a', outcome }), outcome).toBe(0);
    for (const name of [
      'gateway_event_backlog',
      'gateway_event_failed_deliveries',
      'gateway_event_oldest_pending_age_seconds',
      'gateway_event_endpoint_stopped',
    ])
      expect(metricSum(text, name, { endpoint: 'partner-a' }), name).toBe(0);
    expect(metricSum(text, 'gateway_event_delivery_duration_seconds_count', { endpoint: 'partner-a' })).toBe(0);

    metrics.backlog.set({ endpoint: 'partner-a' }, 7);
    metrics.endpointConfigured('partner-a');
    expect(metricSum(await registry.metrics(), 'gateway_event_backlog', { endpoint: 'partner-a' })).toBe(7);

    metrics.deliveries.inc({ endpoint: 'partner-a', outcome: 'delivered' });
    metrics.endpointRemoved('partner-a');
    text = await registry.metrics();
    expect(metricSum(text, 'gateway_event_backlog', { endpoint: 'partner-a' })).toBeUndefined();
    expect(metricSum(text, 'gateway_event_endpoint_stopped', { endpoint: 'partner-a' })).toBeUndefined();
    // Counters stay: a rate over the last hour still sees what was delivered.
    expect(metricSum(text, 'gateway_event_deliveries_total', { endpoint: 'partner-a', outcome: 'delivered' })).toBe(1);
    metrics.endpointConfigured('partner-a');
    expect(metricSum(await registry.metrics(), 'gateway_event_backlog', { endpoint: 'partner-a' })).toBe(0);
  });

  it('lives on the registry it is given: two instances never share a series', async () => {
    const first = new Registry();
    const second = new Registry();
    new EventMetrics(first).connectorEvents.inc({ outcome: 'recorded' });
    new EventMetrics(second);
    expect(metricSum(await first.metrics(), 'gateway_connector_events_total', { outcome: 'recorded' })).toBe(1);
    expect(metricSum(await second.metrics(), 'gateway_connector_events_total', { outcome: 'recorded' })).toBe(0);
  });
});
