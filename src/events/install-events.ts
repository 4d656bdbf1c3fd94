import type { Logger } from 'pino';
import type { CardCursorSealer } from '../cards/card-cursor.js';
import type { CardEvents } from '../cards/card-ports.js';
import { cardEvents } from './card-events.js';
import type { GatewayConfig } from '../config/config-types.js';
import type { EventSettings } from '../config/sections/events.js';
import type { ConnectorEventDraft } from '../connector/connector-events-contract.js';
import type { Clock } from '../foundation/clock.js';
import type { ConnectorEventOutcome, EventMetrics } from '../observability/event-metrics.js';
import type { EventStore, RecordedEvent } from '../store/event-store.js';
import { DeliveryLoop } from './delivery/delivery-loop.js';
import { egressGuarded } from './delivery/egress-guard.js';
import { createWebhookSender, type WebhookSender } from './delivery/webhook-sender.js';
import { EventRecorder, type EventDraft } from './event-recording.js';
import { eventReading, type EventReading } from './read-events.js';

const DAY_MS = 24 * 3600 * 1000;
/** A new event is sent by the replica that recorded it this soon, rather than at the next poll: several events share one round. */
const NUDGE_MS = 20;

/** Events as one capability of the app (D63-D66): built once, reloaded with the config, closed with the app. */
export interface EventsCapability {
  readonly recorder: EventRecorder;
  readonly cards: CardEvents;
  readonly reading: EventReading;
  readonly loop: DeliveryLoop;
  /** The connector listener's port (D64): records a processor-side event, once per connector event id. */
  recordFromConnector(draft: ConnectorEventDraft): Promise<RecordedEvent>;
  /** Counts one POST of the connector (`gateway_connector_events_total`). */
  connectorEvent(outcome: ConnectorEventOutcome): void;
  /** The events section as it is now (reloadable). */
  settings(): EventSettings;
  /** Deliveries start: from listenGateway, never for an app that only answers inject(). */
  start(): void;
  reload(config: GatewayConfig): void;
  /** Stops the deliveries, waiting for the ones in flight at most `drainMs`, and closes their connections. */
  close(drainMs?: number): Promise<void>;
}

export interface EventsDeps {
  readonly config: GatewayConfig;
  readonly store: EventStore;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly cursors: CardCursorSealer;
  readonly metrics: EventMetrics;
  /** Trusted CAs for webhook endpoints instead of the system's (tests with a local TLS receiver). */
  readonly webhookCa?: string | Buffer;
}

/**
 * The sender of the settings now: the egress guard (D65) is a property of its connections, so a
 * reload that allows or forbids private networks gets a new one; the old one closes once idle.
 */
function reloadableSender(config: GatewayConfig, ca: string | Buffer | undefined): { sender: WebhookSender; reload(config: GatewayConfig): void } {
  const make = (next: GatewayConfig) => {
    const guarded = egressGuarded(next.environment, next.events.allowPrivateNetworks);
    return { guarded, sender: createWebhookSender({ guarded, ...(ca !== undefined && { ca }) }) };
  };
  let current = make(config);
  const retired = new Set<WebhookSender>();
  return {
    sender: {
      send: (target, event, now) => current.sender.send(target, event, now),
      close: async () => {
        await Promise.all([current.sender.close(), ...[...retired].map((sender) => sender.close())]);
      },
    },
    reload: (next) => {
      if (egressGuarded(next.environment, next.events.allowPrivateNetworks) === current.guarded) return;
      const old = current.sender;
      retired.add(old);
      current = make(next);
      // Sends in flight on the old one finish within their timeout.
      setTimeout(() => void old.close().finally(() => retired.delete(old)), 60_000).unref();
    },
  };
}

export function buildEvents(deps: EventsDeps): EventsCapability {
  const { store, clock, logger, metrics } = deps;
  let settings: EventSettings = deps.config.events;
  const current = () => settings;
  const senders = reloadableSender(deps.config, deps.webhookCa);
  const loop = new DeliveryLoop({
    store,
    clock,
    endpoints: () => settings.endpoints,
    metrics,
    logger,
    sender: senders.sender,
    // Read at each use: a reload applies them.
    get retentionMs() {
      return settings.retentionDays * DAY_MS;
    },
    get pollIntervalMs() {
      return settings.pollIntervalMs;
    },
  });
  let running = false;
  let nudge: NodeJS.Timeout | undefined;
  /** The endpoints of the events recorded since the nudge was set: only their queues have something new. */
  let nudged = new Set<string>();
  const recorder = new EventRecorder({
    store,
    clock,
    settings: current,
    recorded: (draft: EventDraft, endpoints) => {
      metrics.recorded.inc({ type: draft.type, source: draft.source });
      if (!running || endpoints.length === 0) return;
      for (const endpoint of endpoints) nudged.add(endpoint);
      if (nudge) return;
      nudge = setTimeout(() => {
        const chosen = nudged;
        nudge = undefined;
        nudged = new Set();
        void loop.claimNow(chosen);
      }, NUDGE_MS);
      nudge.unref();
    },
  });
  return {
    recorder,
    loop,
    cards: cardEvents(recorder, logger),
    reading: eventReading({ store, clock, cursors: deps.cursors, settings: current }),
    recordFromConnector: async ({ dedupe, ...draft }) =>
      // Disabled events take nothing: the connector is answered as if recorded, so that it does not retry.
      (await recorder.record({ ...draft, dedupeKey: `connector:${dedupe}` } as EventDraft)) ?? { state: 'recorded', id: '', sequence: 0 },
    connectorEvent: (outcome) => metrics.connectorEvents.inc({ outcome }),
    settings: current,
    start: () => {
      if (running || !settings.enabled) return;
      running = true;
      loop.endpointsChanged();
      loop.start();
    },
    reload: (config) => {
      settings = config.events;
      senders.reload(config);
      loop.endpointsChanged();
    },
    close: async (drainMs = 5_000) => {
      clearTimeout(nudge);
      running = false;
      await loop.stop(drainMs);
      await senders.sender.close();
    },
  };
}
