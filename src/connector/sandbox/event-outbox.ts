import { Agent, request } from 'undici';
import { CONNECTOR_EVENTS_PATH, CONNECTOR_SECRET_HEADER, type ConnectorEvent } from '../connector-events-contract.js';

/** Where the outbox posts: the gateway's connector listener (D64), its base URL without a path. */
export interface EventsTarget {
  url: string;
  /** Sent as `X-Connector-Secret`. */
  secret?: string;
  /** CA that signed the listener's certificate (PEM); the system's CAs without it. */
  ca?: string | Buffer;
  /** Client certificate and key (PEM), for a listener that wants mutual TLS. */
  cert?: string | Buffer;
  key?: string | Buffer;
}

/** Backoff between attempts: doubling from `initialMs`, never longer than `maxMs` (a `Retry-After` is followed up to it). */
export interface OutboxRetry {
  initialMs: number;
  maxMs: number;
}

export const DEFAULT_OUTBOX_RETRY: OutboxRetry = { initialMs: 500, maxMs: 30_000 };

/** Events waiting at most; past it the control routes answer 503 instead of growing without bound. */
export const OUTBOX_PENDING_LIMIT = 1000;
/** Finished events `GET /__control/events` keeps, newest last. */
export const OUTBOX_FINISHED_KEPT = 200;
/** Answers kept per event: an event retried for hours keeps its count, not every answer. */
const ANSWERS_KEPT = 10;
const ANSWER_READ_LIMIT = 4096;
const ATTEMPT_TIMEOUT_MS = 10_000;

/** One answer of the listener (`status`, its JSON body), or why there was none (`error`). */
export type OutboxAnswer = { status: number; body: unknown } | { error: string };

/** `GET /__control/events`: what was sent and what came back. `refused`: answered 400, never retried. */
export interface OutboxEntry {
  eventId: string;
  type: ConnectorEvent['type'];
  issuingAccount: string;
  state: 'pending' | 'delivered' | 'refused';
  attempts: number;
  /** The last answers, oldest first. */
  answers: OutboxAnswer[];
  /** The body as sent. */
  sent: ConnectorEvent;
}

/** 200 and 202: recorded; 400: refused, and a retry would be refused again. Every other answer is retried. */
const isFinal = (status: number): boolean => status === 200 || status === 202 || status === 400;

interface PreparedTarget {
  url: string;
  headers: Record<string, string>;
  agent: Agent;
}

const endpointOf = (url: string): string => `${url.replace(/\/+$/, '')}${CONNECTOR_EVENTS_PATH}`;

/** A wait that `wake()` ends early (a new target, or close). */
class Pause {
  #wake: (() => void) | undefined;

  for(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#wake = done;
    });
  }

  wake(): void {
    this.#wake?.();
  }
}

/**
 * The sandbox connector's outbox: every event its control routes simulate, posted to the
 * gateway's connector listener one at a time, in order, until the listener answers 200 or 202
 * (recorded) or 400 (refused: a retry would be refused again). Anything else (503, a refused
 * connection, a timeout) is retried with a bounded backoff, for as long as the sandbox runs.
 * Without a target, events wait for one (`setTarget`).
 */
export class EventOutbox {
  readonly #retry: OutboxRetry;
  readonly #pending: OutboxEntry[] = [];
  readonly #finished: OutboxEntry[] = [];
  readonly #pause = new Pause();
  #target: PreparedTarget | undefined;
  #sending: Promise<void> | undefined;
  #inFlight: AbortController | undefined;
  #closed = false;

  constructor(target: EventsTarget | undefined, retry: Partial<OutboxRetry> = {}) {
    this.#retry = { ...DEFAULT_OUTBOX_RETRY, ...retry };
    if (!(this.#retry.initialMs >= 0 && this.#retry.maxMs >= this.#retry.initialMs)) throw new TypeError('eventsRetry: 0 <= initialMs <= maxMs');
    this.setTarget(target);
  }

  get target(): string | undefined {
    return this.#target?.url;
  }

  get full(): boolean {
    return this.#pending.length >= OUTBOX_PENDING_LIMIT;
  }

  /**
   * Posts from now on to `target` (undefined: holds events until one is set). The event being
   * retried is tried again at once on the new target.
   * @throws TypeError when the URL is not an http(s) URL without a path.
   */
  setTarget(target: EventsTarget | undefined): void {
    if (target && !/^https?:\/\/[^/?#]+\/?$/.test(target.url)) throw new TypeError(`events target: not an http(s) base URL: ${target.url}`);
    const previous = this.#target;
    this.#target = target && {
      url: endpointOf(target.url),
      headers: { 'content-type': 'application/json', ...(target.secret !== undefined && { [CONNECTOR_SECRET_HEADER]: target.secret }) },
      agent: new Agent({
        connect: {
          rejectUnauthorized: true,
          ...(target.ca !== undefined && { ca: target.ca }),
          ...(target.cert !== undefined && { cert: target.cert }),
          ...(target.key !== undefined && { key: target.key }),
        },
        headersTimeout: ATTEMPT_TIMEOUT_MS,
        bodyTimeout: ATTEMPT_TIMEOUT_MS,
      }),
    };
    if (previous) void previous.agent.close().catch(() => undefined);
    this.#pause.wake();
    this.#start();
  }

  /** Queues one event; the caller checked `full` first. */
  add(event: ConnectorEvent): void {
    this.#pending.push({
      eventId: event.eventId,
      type: event.type,
      issuingAccount: event.issuingAccount,
      state: 'pending',
      attempts: 0,
      answers: [],
      sent: event,
    });
    this.#start();
  }

  /** Finished events (oldest first), then the ones still waiting, in sending order. */
  entries(): OutboxEntry[] {
    return [...this.#finished, ...this.#pending].map((entry) => ({ ...entry, answers: [...entry.answers] }));
  }

  clear(): void {
    this.#finished.length = 0;
    this.#pending.length = 0;
  }

  /** Stops sending: the attempt under way is abandoned, waiting events stay unsent. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#inFlight?.abort();
    this.#pause.wake();
    await this.#sending;
    await this.#target?.agent.close().catch(() => undefined);
  }

  #start(): void {
    if (this.#sending || this.#closed) return;
    this.#sending = this.#drain().finally(() => {
      this.#sending = undefined;
      // An event added or a target set while the loop was ending.
      if (!this.#closed && this.#target && this.#pending.length > 0) this.#start();
    });
  }

  async #drain(): Promise<void> {
    let failures = 0;
    for (;;) {
      const entry = this.#pending[0];
      const target = this.#target;
      if (this.#closed || !entry || !target) return;
      const { answer, retryAfter } = await this.#post(target, entry);
      if (this.#closed) return;
      // Forgotten while it was being sent (`/__control/reset`).
      if (this.#pending[0] !== entry) continue;
      entry.attempts += 1;
      entry.answers.push(answer);
      if (entry.answers.length > ANSWERS_KEPT) entry.answers.shift();
      if ('status' in answer && isFinal(answer.status)) {
        entry.state = answer.status === 400 ? 'refused' : 'delivered';
        this.#pending.shift();
        this.#finished.push(entry);
        if (this.#finished.length > OUTBOX_FINISHED_KEPT) this.#finished.shift();
        failures = 0;
        continue;
      }
      failures += 1;
      await this.#pause.for(this.#delay(failures, retryAfter));
    }
  }

  #delay(failures: number, retryAfterSeconds: number | undefined): number {
    const { initialMs, maxMs } = this.#retry;
    const backoff = initialMs * 2 ** Math.min(failures - 1, 30);
    return Math.min(maxMs, Math.max(backoff, (retryAfterSeconds ?? 0) * 1000));
  }

  /** One attempt; never rejects. `retryAfter`: the answer's `Retry-After`, in seconds. */
  async #post(target: PreparedTarget, entry: OutboxEntry): Promise<{ answer: OutboxAnswer; retryAfter?: number }> {
    const abort = new AbortController();
    this.#inFlight = abort;
    try {
      const answer = await request(target.url, {
        method: 'POST',
        headers: target.headers,
        body: JSON.stringify(entry.sent),
        dispatcher: target.agent,
        signal: abort.signal,
      });
      const text = (await answer.body.text()).slice(0, ANSWER_READ_LIMIT);
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // Kept as text: what the listener said, whatever it was.
      }
      const retryAfter = Number(answer.headers['retry-after']);
      return { answer: { status: answer.statusCode, body }, ...(Number.isFinite(retryAfter) && retryAfter > 0 && { retryAfter }) };
    } catch (error) {
      const { code, name } = error as { code?: unknown; name?: unknown };
      return { answer: { error: typeof code === 'string' ? code : typeof name === 'string' ? name : 'error' } };
    } finally {
      this.#inFlight = undefined;
    }
  }
}
