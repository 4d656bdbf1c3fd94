import type { GatewayConfig } from '../config/config-types.js';
import type { LiveSettings } from '../config/live-settings.js';
import type { ConnectorClient } from '../connector/connector-port.js';
import type { Clock } from '../foundation/clock.js';
import type { Outcomes } from '../observability/outcomes.js';
import type { GatewayStore } from '../store/store-types.js';
import type { CardCursorSealer } from './card-cursor.js';
import type { CardEvents } from './card-events.js';
import type { CardSealer } from './card-sealing.js';
import type { PendingRecords } from './pending-records.js';

/**
 * What every card use case is built on, built once by the app factory: the shared store, the
 * connector port, the outcome recorder (every metric, audit line and card log line), the
 * card-record sealer and the cursor sealer, the records still being written, the reloadable
 * settings and the fixed ones.
 */
export interface CardPorts {
  readonly store: GatewayStore;
  readonly clock: Clock;
  readonly connector: ConnectorClient;
  readonly outcomes: Outcomes;
  readonly sealer: CardSealer;
  /** Seals the list cursors handed to clients (D44), with keys derived from the card-record keys. */
  readonly cursors: CardCursorSealer;
  readonly live: LiveSettings;
  /** Creation's idempotency records answered but not yet acknowledged by the store: reveal reads them, shutdown waits for them. */
  readonly pendingRecords: PendingRecords;
  /** card.created and card.status_changed (D64), sent with the card's own write. */
  readonly events: CardEvents;
  readonly settings: {
    readonly connector: GatewayConfig['connector'];
    readonly cards: GatewayConfig['cards'];
    readonly store: GatewayConfig['store'];
  };
}
