import type { Clock } from '../foundation/clock.js';
import type { ErrorCode } from '../foundation/error-catalogue.js';
import { addressBucket } from '../foundation/address-ranges.js';
import { FileAppender, type AppenderState } from './file-appender.js';
import { maskCardNumbers } from '../foundation/card-number-detector.js';
import { maskedForLine, UNMASKED_FIELDS } from './line-masking.js';

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
  | 'card.refused'
  | 'config.reloaded'
  | 'config.reload_failed'
  | 'credential.sessions_ended'
  | 'event.redelivered';

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
  /** A refusal summary of a card route (D60): the route, and the card ids as the client sent them. */
  route?: string | undefined;
  cardIds?: string[] | undefined;
  /** A redelivery an operator asked for on the admin listener (D65): the webhook endpoint, the event (absent: every failed one) and how many deliveries are due again. */
  endpointId?: string | undefined;
  eventId?: string | undefined;
  redelivered?: number | undefined;
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

/** The refusals of a card route that are audited in per-credential summaries (D60): each named by the code answered. */
export type CardRefusalReason = Extract<ErrorCode, 'card_not_found' | 'card_canceled' | 'invalid_cursor' | 'permission_denied'>;

/** One refusal of a card route, by an authenticated credential (D60). */
export interface CardRefusal {
  credential: string;
  reason: CardRefusalReason;
  /** `METHOD /path/template`, e.g. `GET /api/v1/issuing/cards/:cardId`. */
  route: string;
  /** The card id as the client sent it, when the route has one. */
  cardId?: string | undefined;
  correlationId: string;
  clientAddress: string;
}

/** Distinct card ids a refusal summary lists; the count covers the rest. */
export const MAX_LISTED_CARD_IDS = 20;
/** Characters of one listed card id: the longest id the contract has; the rest is cut off (after masking, D58). */
export const MAX_LISTED_CARD_ID_LENGTH = 128;

export interface AuditSink {
  record(event: AuditEvent): void;
  /** Counts one refusal into the current window's summary for (reason, source). */
  deny(reason: DenialReason, clientAddress: string, correlationId: string): void;
  /** Counts one refusal of a card route into the current window's summary for (credential, reason, route) (D60). */
  refuse(refusal: CardRefusal): void;
  /** False while audit lines cannot be written: audited requests answer 503 (D26). */
  readonly writable: boolean;
  /** Writes the summaries of windows that have ended (all of them with `all`). */
  flushDenials(all?: boolean): void;
  /** Opens the audit file again after log rotation (SIGHUP). */
  reopen(): Promise<void>;
  close(): Promise<void>;
}

export const DENIAL_WINDOW_MS = 60_000;

/** The fields of a line, in the order they are written (after `time`; a summary's count and window last). */
const LINE_FIELDS = [
  'event',
  'correlationId',
  'credential',
  'clientAddress',
  'outcome',
  'reason',
  'requestId',
  'cardId',
  'from',
  'to',
  'changed',
  'route',
  'cardIds',
  'endpointId',
  'eventId',
  'redelivered',
  'count',
  'windowStart',
  'windowEnd',
] as const satisfies readonly (keyof DenialSummary)[];

/**
 * One line: the fields in a fixed order, absent ones left out, every string of client origin
 * passed through the card-number detector (D58, line-masking.ts), whichever field carries it.
 * Written field by field: the JSON of the object with every field, masked, without making it
 * (a line a card, issue 34).
 */
function line(time: number, event: AuditEvent | DenialSummary): string {
  let text = `{"time":"${new Date(time).toISOString()}"`;
  const fields = event as Partial<Record<(typeof LINE_FIELDS)[number], unknown>>;
  for (const field of LINE_FIELDS) {
    const value = fields[field];
    if (value === undefined) continue;
    text += `,"${field}":${JSON.stringify(UNMASKED_FIELDS.has(field) ? value : maskedForLine(value))}`;
  }
  return `${text}}\n`;
}

/**
 * Per-minute summaries: an attacker outside the allowlist, one replaying bad tokens, or a
 * credential probing card ids, produces one line per key per minute instead of one per request,
 * so it cannot fill the audit volume; and at most `maxLines` keys are itemised per window, the
 * rest counted in one overflow line, so neither memory nor the file grows with the attack.
 */
class MinuteSummaries<Entry extends { count: number }> {
  #windowStart = -1;
  #open = new Map<string, Entry>();
  #overflow = 0;

  constructor(
    private readonly clock: Clock,
    private readonly maxLines: number,
    /** Writes one window's lines: each entry, then the overflow count when there is one. */
    private readonly emit: (end: number, bounds: { windowStart: string; windowEnd: string }, entries: Iterable<Entry>, overflow: number) => void,
  ) {}

  /** Counts into the entry of `key`, made by `open` the first time the window sees it. */
  add(key: string, open: () => Entry, also?: (entry: Entry) => void): void {
    const now = this.clock.now();
    const window = Math.floor(now / DENIAL_WINDOW_MS) * DENIAL_WINDOW_MS;
    if (window !== this.#windowStart) {
      this.flush(true);
      this.#windowStart = window;
    }
    const entry = this.#open.get(key);
    if (entry) {
      entry.count += 1;
      also?.(entry);
    } else if (this.#open.size < this.maxLines) this.#open.set(key, open());
    else this.#overflow += 1;
  }

  flush(all: boolean): void {
    if (this.#windowStart < 0) return;
    const end = this.#windowStart + DENIAL_WINDOW_MS;
    if (!all && this.clock.now() < end) return;
    this.emit(end, { windowStart: new Date(this.#windowStart).toISOString(), windowEnd: new Date(end).toISOString() }, this.#open.values(), this.#overflow);
    this.#open = new Map();
    this.#overflow = 0;
    this.#windowStart = -1;
  }
}

interface OpenDenial {
  reason: DenialReason;
  source: string;
  count: number;
  correlationId: string;
}

interface OpenRefusal {
  credential: string;
  reason: CardRefusalReason;
  route: string;
  count: number;
  cardIds: Set<string>;
  correlationId: string;
  clientAddress: string;
}

/** The id as a summary lists it: card numbers masked first (D58), then cut to the contract's longest id. */
function listedCardId(cardId: string): string {
  const masked = maskCardNumbers(cardId);
  return masked.length > MAX_LISTED_CARD_ID_LENGTH ? `${masked.slice(0, MAX_LISTED_CARD_ID_LENGTH)}…` : masked;
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
  readonly #denials: MinuteSummaries<OpenDenial>;
  readonly #refusals: MinuteSummaries<OpenRefusal>;
  readonly #timer: NodeJS.Timeout;

  constructor(
    protected readonly sink: LineSink,
    protected readonly clock: Clock,
    options: { maxDenialLinesPerMinute?: number } = {},
  ) {
    const maxLines = options.maxDenialLinesPerMinute ?? 1000;
    const write = (time: number, summary: DenialSummary) => this.sink.append(line(time, summary));
    this.#denials = new MinuteSummaries<OpenDenial>(clock, maxLines, (end, bounds, entries, overflow) => {
      for (const { reason, source, count, correlationId } of entries)
        write(end, { event: 'access.denied', outcome: 'denied', reason, clientAddress: source, correlationId, count, ...bounds });
      if (overflow > 0)
        write(end, { event: 'access.denied', outcome: 'denied', reason: 'overflow', clientAddress: '*', correlationId: '', count: overflow, ...bounds });
    });
    this.#refusals = new MinuteSummaries<OpenRefusal>(clock, maxLines, (end, bounds, entries, overflow) => {
      for (const entry of entries) {
        const { credential, reason, route, count, correlationId, clientAddress } = entry;
        const cardIds = entry.cardIds.size > 0 ? [...entry.cardIds] : undefined;
        write(end, { event: 'card.refused', outcome: 'denied', credential, reason, route, cardIds, clientAddress, correlationId, count, ...bounds });
      }
      if (overflow > 0)
        write(end, { event: 'card.refused', outcome: 'denied', reason: 'overflow', clientAddress: '*', correlationId: '', count: overflow, ...bounds });
    });
    // Windows close on the injected clock; checking every second keeps summaries at most a second late.
    this.#timer = setInterval(() => this.flushDenials(false), 1000);
    this.#timer.unref();
  }

  get writable(): boolean {
    return this.sink.writable;
  }

  record(event: AuditEvent): void {
    this.sink.append(line(this.clock.now(), event));
  }

  deny(reason: DenialReason, clientAddress: string, correlationId: string): void {
    const source = addressBucket(clientAddress);
    this.#denials.add(`${reason} ${source}`, () => ({ reason, source, count: 1, correlationId }));
  }

  refuse(refusal: CardRefusal): void {
    const { credential, reason, route, cardId, correlationId, clientAddress } = refusal;
    const note = (entry: OpenRefusal) => {
      if (cardId !== undefined && entry.cardIds.size < MAX_LISTED_CARD_IDS) entry.cardIds.add(listedCardId(cardId));
    };
    this.#refusals.add(
      `${credential} ${reason} ${route}`,
      () => {
        const entry: OpenRefusal = { credential, reason, route, count: 1, cardIds: new Set(), correlationId, clientAddress };
        note(entry);
        return entry;
      },
      note,
    );
  }

  flushDenials(all = true): void {
    this.#denials.flush(all);
    this.#refusals.flush(all);
  }

  reopen(): Promise<void> {
    return this.sink.reopen();
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    this.flushDenials(true);
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
