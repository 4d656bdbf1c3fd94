import type { Logger } from 'pino';
import type { CardCursorSealer } from '../cards/card-cursor.js';
import { cardEvents, type CardEvents } from '../cards/card-events.js';
import type { GatewayConfig } from '../config/config-types.js';
import type { EventSettings } from '../config/sections/events.js';
import type { Clock } from '../foundation/clock.js';
import type { ConnectorEventDraft } from '../connector/connector-events-contract.js';
import type { EventStore, RecordedEvent } from '../store/event-store.js';
import { EventRecorder, type EventDraft } from './event-recording.js';
import { eventReading, type EventReading } from './read-events.js';

/** Events as one capability of the app (D63-D66): built once, reloaded with the config, closed with the app. */
export interface EventsCapability {
  readonly recorder: EventRecorder;
  readonly cards: CardEvents;
  readonly reading: EventReading;
  /** The connector listener's port (D64): records a processor-side event, once per connector event id. */
  recordFromConnector(draft: ConnectorEventDraft): Promise<RecordedEvent>;
  /** The events section as it is now (reloadable). */
  settings(): EventSettings;
  reload(config: GatewayConfig): void;
  close(): Promise<void>;
}

export interface EventsDeps {
  readonly config: GatewayConfig;
  readonly store: EventStore;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly cursors: CardCursorSealer;
  /** Told of every event recorded (not a repeat): the metric and the delivery loop's nudge. */
  readonly recorded?: (draft: EventDraft, endpoints: readonly string[]) => void;
}

export function buildEvents(deps: EventsDeps): EventsCapability {
  let settings: EventSettings = deps.config.events;
  const current = () => settings;
  const recorder = new EventRecorder({
    store: deps.store,
    clock: deps.clock,
    settings: current,
    recorded: (draft, endpoints) => deps.recorded?.(draft, endpoints),
  });
  return {
    recorder,
    cards: cardEvents(recorder, deps.logger),
    recordFromConnector: async ({ dedupe, ...draft }) =>
      // Disabled events take nothing: the connector is answered as if recorded, so that it does not retry.
      (await recorder.record({ ...draft, dedupeKey: `connector:${dedupe}` } as EventDraft)) ?? { state: 'recorded', id: '', sequence: 0 },
    reading: eventReading({ store: deps.store, clock: deps.clock, cursors: deps.cursors, settings: current }),
    settings: current,
    reload: (config) => {
      settings = config.events;
    },
    close: async () => undefined,
  };
}
