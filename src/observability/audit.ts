import type { Clock } from '../foundation/clock.js';
import type { ErrorCode } from '../foundation/error-catalogue.js';
import { addressBucket } from '../foundation/address-ranges.js';
import { FileAppender, type AppenderState } from './file-appender.js';
import { maskedForLine } from './line-masking.js';

export type AuditEventName =
  | 'login.succeeded'
  | 'login.failed'
  | 'login.rate_limited'
  | 'login.locked_out'
  | 'refresh.succeeded'
  | 'refresh.failed'
  | 'refresh.rate_limited'
  | 'refresh.reuse_detected'
  | 'logout'
  | 'access.denied'
  | 'card.created'
  | 'card.replayed'
  | 'card.revealed'
  | 'card.failed'
  | 'card.status_changed'
  | 'card.status_change_requested'
  | 'card.rate_limited'
  | 'config.reloaded'
  | 'config.reload_failed'
  | 'credential.sessions_ended';

/**
 * One audit event (D21). The fields are a closed list of identifiers: there is no place to
 * put a token, password, PAN or CVC, so none can leak through a careless call.
 */
export interface AuditEvent {
  event: AuditEventName;
  correlationId: string;
  clientAddress: string;
  outcome: 'success' | 'failure' | 'denied';
  credential?: string | undefined;
  /** Why it was denied or failed, from a fixed vocabulary (`inactive`, `address`, `permission`, ...). */
  reason?: string | undefined;
  requestId?: string | undefined;
  cardId?: string | undefined;
  /** A status change (D45, D57): the status before and after, as the connector answered them. */
  from?: string | undefined;
  to?: string | undefined;
  /** A status change: whether this request changed the status (false: the card already had it). */
  changed?: boolean | undefined;
}

/**
 * Refusals that happen before a credential is known; audited in per-minute summaries (D25, D34).
 * Each is named by the error code the client gets (one vocabulary for codes, audit and metrics).
 */
export type DenialReason = Extract<ErrorCode, 'address_not_allowed' | 'token_missing' | 'token_malformed' | 'token_invalid' | 'token_expired' | 'token_in_url'>;

/** A summary line: one per reason and source (IPv6 per /64) per window, with a count. */
export interface DenialSummary extends AuditEvent {
  count: number;
  windowStart: string;
  windowEnd: string;
}

export interface AuditSink {
  record(event: AuditEvent): void;
  /** Counts one refusal into the current window's summary for (reason, source). */
  deny(reason: DenialReason, clientAddress: string, correlationId: string): void;
  /** False while audit lines cannot be written: audited requests answer 503 (D26). */
  readonly writable: boolean;
  /** Writes the summaries of windows that have ended (all of them with `all`). */
  flushDenials(all?: boolean): void;
  /** Opens the audit file again after log rotation (SIGHUP). */
  reopen(): Promise<void>;
  close(): Promise<void>;
}

export const DENIAL_WINDOW_MS = 60_000;

/**
 * One line: the fields in a fixed order, every string of client origin passed through the
 * card-number detector (D58, line-masking.ts), whichever field carries it.
 */
function line(time: number, event: AuditEvent | DenialSummary): string {
  const { event: name, correlationId, clientAddress, outcome, credential, reason, requestId, cardId, from, to, changed } = event;
  const summary = 'count' in event ? { count: event.count, windowStart: event.windowStart, windowEnd: event.windowEnd } : {};
  const record = {
    time: new Date(time).toISOString(),
    event: name,
    correlationId,
    credential,
    clientAddress,
    outcome,
    reason,
    requestId,
    cardId,
    from,
    to,
    changed,
    ...summary,
  };
  return `${JSON.stringify(maskedForLine(record))}\n`;
}

interface OpenSummary {
  reason: DenialReason;
  source: string;
  count: number;
  correlationId: string;
}

/**
 * Per-minute summaries of refusals. An attacker outside the allowlist, or one replaying bad
 * tokens, produces one line per source per minute instead of one per request, so it cannot
 * fill the audit volume; and at most `maxLines` sources are itemised per window, the rest
 * counted in one overflow line, so neither memory nor the file grows with the attack.
 */
class DenialSummaries {
  #windowStart = -1;
  #open = new Map<string, OpenSummary>();
  #overflow = 0;

  constructor(
    private readonly clock: Clock,
    private readonly maxLines: number,
    private readonly emit: (time: number, summary: DenialSummary) => void,
  ) {}

  add(reason: DenialReason, address: string, correlationId: string): void {
    const now = this.clock.now();
    const window = Math.floor(now / DENIAL_WINDOW_MS) * DENIAL_WINDOW_MS;
    if (window !== this.#windowStart) {
      this.flush(true);
      this.#windowStart = window;
    }
    const source = addressBucket(address);
    const key = `${reason} ${source}`;
    const open = this.#open.get(key);
    if (open) open.count += 1;
    else if (this.#open.size < this.maxLines) this.#open.set(key, { reason, source, count: 1, correlationId });
    else this.#overflow += 1;
  }

  flush(all: boolean): void {
    if (this.#windowStart < 0) return;
    const end = this.#windowStart + DENIAL_WINDOW_MS;
    if (!all && this.clock.now() < end) return;
    const bounds = { windowStart: new Date(this.#windowStart).toISOString(), windowEnd: new Date(end).toISOString() };
    for (const summary of this.#open.values()) {
      this.emit(end, {
        event: 'access.denied',
        outcome: 'denied',
        reason: summary.reason,
        clientAddress: summary.source,
        correlationId: summary.correlationId,
        count: summary.count,
        ...bounds,
      });
    }
    if (this.#overflow > 0) {
      this.emit(end, {
        event: 'access.denied',
        outcome: 'denied',
        reason: 'overflow',
        clientAddress: '*',
        correlationId: '',
        count: this.#overflow,
        ...bounds,
      });
    }
    this.#open = new Map();
    this.#overflow = 0;
    this.#windowStart = -1;
  }
}

/** Where audit lines go: a file (production), or memory (tests). */
interface LineSink {
  append(line: string): void;
  readonly writable: boolean;
  reopen(): Promise<void>;
  close(): Promise<void>;
}

/** The audit trail (D21): immediate lines for events, per-minute summaries for refusals. */
export class AuditTrail implements AuditSink {
  readonly #summaries: DenialSummaries;
  readonly #timer: NodeJS.Timeout;

  constructor(
    protected readonly sink: LineSink,
    protected readonly clock: Clock,
    options: { maxDenialLinesPerMinute?: number } = {},
  ) {
    this.#summaries = new DenialSummaries(clock, options.maxDenialLinesPerMinute ?? 1000, (time, summary) => this.sink.append(line(time, summary)));
    // Windows close on the injected clock; checking every second keeps summaries at most a second late.
    this.#timer = setInterval(() => this.#summaries.flush(false), 1000);
    this.#timer.unref();
  }

  get writable(): boolean {
    return this.sink.writable;
  }

  record(event: AuditEvent): void {
    this.sink.append(line(this.clock.now(), event));
  }

  deny(reason: DenialReason, clientAddress: string, correlationId: string): void {
    this.#summaries.add(reason, clientAddress, correlationId);
  }

  flushDenials(all = true): void {
    this.#summaries.flush(all);
  }

  reopen(): Promise<void> {
    return this.sink.reopen();
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    this.#summaries.flush(true);
    await this.sink.close();
  }
}

/**
 * The audit file: JSON lines appended without blocking (FileAppender), created 0640, reopened
 * on SIGHUP. While it cannot be written, `writable` is false and the gateway fails closed.
 */
export function createFileAuditSink(
  file: string,
  clock: Clock,
  options: { fsync: boolean; maxDenialLinesPerMinute?: number; onState?: (state: AppenderState) => void; onDropped?: (lines: number) => void },
): AuditSink {
  const appender = new FileAppender(file, {
    fsync: options.fsync,
    ...(options.onState && { onState: options.onState }),
    ...(options.onDropped && { onDropped: options.onDropped }),
  });
  return new AuditTrail(appender, clock, options);
}

/** Keeps lines in memory; tests read `lines` to prove what was (and was not) audited. */
export class MemoryAuditSink extends AuditTrail {
  readonly lines: string[];

  constructor(clock: Clock, options: { maxDenialLinesPerMinute?: number } = {}) {
    const lines: string[] = [];
    const sink: LineSink & { broken: boolean } = {
      broken: false,
      append: (text) => {
        lines.push(text);
      },
      get writable() {
        return !this.broken;
      },
      reopen: async () => undefined,
      close: async () => undefined,
    };
    super(sink, clock, options);
    this.lines = lines;
  }

  /** Makes `writable` false (or true again), as a failing disk would. */
  setWritable(writable: boolean): void {
    (this.sink as LineSink & { broken: boolean }).broken = !writable;
  }

  events(): (AuditEvent & { time: string; count?: number })[] {
    return this.lines.map((text) => JSON.parse(text) as AuditEvent & { time: string; count?: number });
  }
}
