import type { Clock } from '../foundation/clock.js';
import type { ConnectionRefusal } from './address-budgets.js';

/** Why a connection was closed at accept, before any TLS work: the metrics' `reason` and the log's. */
export type AcceptRefusal = 'connection_cap' | 'outsider_cap' | ConnectionRefusal;

/** The setting each refusal is decided by: what an operator reading the log line would look at. */
const SETTING: Record<AcceptRefusal, string> = {
  connection_cap: 'edge.maxConnections',
  outsider_cap: 'edge.maxOutsiderConnections',
  connections_per_second: 'limits.perAddress.connectionsPerSecond',
  open_connections: 'limits.perAddress.connections',
};

/** The least a logger must do here (pino's `warn` fits). */
export interface WarningLogger {
  warn(fields: Record<string, unknown>, message: string): void;
}

/** At most one line per reason in this long (the injected clock's milliseconds). */
export const ACCEPT_REFUSAL_LOG_INTERVAL_MS = 60_000;

/**
 * D59: a refusal at accept is never silent, and a flood of them is never a flood of log lines.
 * The first refusal of a reason is logged at once; later ones are counted and the next line, once
 * a minute has passed, carries how many there were since the previous one. The metrics count
 * every refusal exactly; the log says that it happens and which setting decides it. No address
 * is logged: the line tells an operator what to look at, the metrics how much.
 */
export class AcceptRefusalLog {
  readonly #byReason = new Map<AcceptRefusal, { loggedAt: number; unlogged: number }>();

  constructor(
    private readonly logger: WarningLogger,
    private readonly clock: Clock,
  ) {}

  refused(reason: AcceptRefusal): void {
    const now = this.clock.now();
    const state = this.#byReason.get(reason);
    if (state !== undefined && now - state.loggedAt < ACCEPT_REFUSAL_LOG_INTERVAL_MS && now >= state.loggedAt) {
      state.unlogged += 1;
      return;
    }
    const refused = (state?.unlogged ?? 0) + 1;
    this.#byReason.set(reason, { loggedAt: now, unlogged: 0 });
    this.logger.warn({ reason, refused, setting: SETTING[reason], intervalSeconds: ACCEPT_REFUSAL_LOG_INTERVAL_MS / 1000 }, 'connections refused at accept');
  }
}
