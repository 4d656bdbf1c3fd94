import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Clock } from '../../foundation/clock.js';
import type { EventMetrics, DeliveryOutcome } from '../../observability/event-metrics.js';
import type { ClaimedDelivery, DeliverySettlement, EndpointRef, EventStore } from '../../store/event-store.js';
import { nextAttemptDelay } from './retry-schedule.js';
import type { SendResult, WebhookSender, WebhookTarget } from './webhook-sender.js';

/** One webhook endpoint as the loop reads it from the configuration (`events.endpoints[]`). */
export interface DeliveryEndpoint extends WebhookTarget {
  readonly id: string;
  readonly issuingAccount: string;
  /** Deliveries to it in flight at once from this replica. */
  readonly maxInFlight: number;
}

/** A claim outlives the send's deadline by this much: a live replica settles before another may take the delivery over. */
export const LEASE_MARGIN_MS = 5_000;

export interface DeliveryLoopOptions {
  readonly store: EventStore;
  readonly clock: Clock;
  /** The endpoints now (read every round, so a reload applies at the next one). */
  readonly endpoints: () => readonly DeliveryEndpoint[];
  readonly metrics: EventMetrics;
  readonly logger: Logger;
  readonly sender: WebhookSender;
  /** How long a failed delivery is kept for redelivery (`events.retentionDays`). */
  readonly retentionMs: number;
  /** How often start() looks for due deliveries (`events.pollIntervalMs`). */
  readonly pollIntervalMs: number;
  /** The retry jitter's source, in [0, 1); Math.random by default. */
  readonly random?: () => number;
  /** This replica's part of the claim owners; random by default. */
  readonly replica?: string;
}

/**
 * Delivers the recorded events to the webhook endpoints (D65), on every replica. Each round,
 * for each endpoint, it claims the deliveries that are due (as many as the endpoint has room
 * for: `maxInFlight` per replica), sends each on its own promise and settles it when the
 * answer comes: delivered, due again per the retry schedule, or failed after the last attempt.
 * A round only waits for the store, never for a send, so a slow endpoint holds its own slots
 * and nobody else's, and nothing here is on a request's path. A claim is a lease of the send's
 * deadline plus 5 s: a replica that dies mid-send leaves its deliveries to be taken over.
 *
 * An endpoint that answers 410 asks for no more: this replica stops sending to it (one log
 * line, `gateway_event_endpoint_stopped` 1) until `resume()` or a reload (`endpointsChanged()`);
 * its deliveries wait in the store meanwhile.
 */
export class DeliveryLoop {
  readonly #options: DeliveryLoopOptions;
  readonly #random: () => number;
  readonly #replica: string;
  #claims = 0;
  /** Sends in flight per endpoint id, and the slots of claims on their way to the store (so that concurrent claims never pass maxInFlight). */
  readonly #inFlight = new Map<string, number>();
  readonly #claiming = new Map<string, number>();
  /**
   * Endpoints whose last claim filled every free slot: more may be due, so a slot freed by a
   * settled send claims again at once instead of waiting for the next round (a backlog drains
   * at the endpoint's pace, not at maxInFlight per poll interval).
   */
  readonly #full = new Set<string>();
  readonly #sends = new Set<Promise<void>>();
  /** Endpoints stopped by a 410. */
  readonly #stopped = new Set<string>();
  /** Endpoint ids whose series exist. */
  readonly #known = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #round: Promise<void> | undefined;
  #running = false;
  /** Past stop()'s drain: answers that come now are not settled (the lease hands them on). */
  #abandoned = false;
  #storeFailing = false;

  constructor(options: DeliveryLoopOptions) {
    this.#options = options;
    this.#random = options.random ?? Math.random;
    this.#replica = options.replica ?? randomBytes(6).toString('hex');
  }

  /** Runs a round every pollIntervalMs, on a timer that does not keep the process alive. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#abandoned = false;
    this.#schedule();
  }

  /**
   * Stops claiming, then waits up to `drainMs` for the sends in flight to be answered and
   * settled. Any still out after that are left unsettled: their leases end and a replica sends
   * them again (delivery is at least once). The sender is the caller's to close.
   */
  async stop(drainMs = 5_000): Promise<void> {
    this.#running = false;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#round;
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, drainMs);
    });
    await Promise.race([this.idle(), bound]);
    clearTimeout(timer);
    this.#abandoned = true;
  }

  /** Settles when no send is in flight (tests; stop()'s drain). */
  async idle(): Promise<void> {
    while (this.#sends.size > 0) await Promise.allSettled([...this.#sends]);
  }

  /** One round at `now`: claims and starts sends for every endpoint, and refreshes the backlog gauges. Resolves before the sends are answered. */
  async runOnce(now: number = this.#options.clock.now()): Promise<void> {
    const endpoints = this.#options.endpoints();
    this.#track(endpoints);
    const results = await Promise.allSettled(endpoints.map((endpoint) => this.#roundFor(endpoint, now)));
    const failure = results.find((result) => result.status === 'rejected');
    if (failure) {
      if (!this.#storeFailing)
        this.#options.logger.warn({ err: errorSummary(failure.reason) }, 'event deliveries wait: the store did not answer; retrying every round');
      this.#storeFailing = true;
    } else if (this.#storeFailing) {
      this.#storeFailing = false;
      this.#options.logger.info('event deliveries go on: the store answers again');
    }
  }

  /** Whether this replica has stopped sending to the endpoint after a 410. */
  isStopped(endpointId: string): boolean {
    return this.#stopped.has(endpointId);
  }

  /** Sends to a stopped endpoint again from the next round; false when it was not stopped. */
  resume(endpointId: string): boolean {
    if (!this.#stopped.delete(endpointId)) return false;
    this.#options.metrics.endpointStopped.set({ endpoint: endpointId }, 0);
    this.#options.logger.info({ endpoint: endpointId }, 'webhook deliveries to the endpoint resumed');
    return true;
  }

  /** A reload: every stopped endpoint is sent to again (D65), and the series follow the new list. */
  endpointsChanged(): void {
    for (const endpointId of [...this.#stopped]) this.resume(endpointId);
    this.#track(this.#options.endpoints());
  }

  #schedule(): void {
    if (!this.#running) return;
    this.#timer = setTimeout(() => {
      this.#round = this.runOnce().finally(() => {
        this.#round = undefined;
        this.#schedule();
      });
    }, this.#options.pollIntervalMs);
    this.#timer.unref();
  }

  #track(endpoints: readonly DeliveryEndpoint[]): void {
    const ids = new Set(endpoints.map((endpoint) => endpoint.id));
    for (const id of ids) {
      if (this.#known.has(id)) continue;
      this.#known.add(id);
      this.#options.metrics.endpointConfigured(id);
    }
    for (const id of this.#known) {
      if (ids.has(id)) continue;
      this.#known.delete(id);
      this.#stopped.delete(id);
      this.#full.delete(id);
      this.#options.metrics.endpointRemoved(id);
    }
  }

  async #roundFor(endpoint: DeliveryEndpoint, now: number): Promise<void> {
    const { store, metrics } = this.#options;
    const ref: EndpointRef = { issuingAccount: endpoint.issuingAccount, endpointId: endpoint.id };
    await this.#claim(endpoint, ref, now);
    const backlog = await store.backlog(ref);
    const labels = { endpoint: endpoint.id };
    metrics.backlog.set(labels, backlog.pending);
    metrics.failedDeliveries.set(labels, backlog.failed);
    const due = backlog.oldestDueAt !== undefined && backlog.oldestDueAt <= now;
    metrics.oldestPendingAge.set(labels, due ? (now - backlog.oldestDueAt!) / 1000 : 0);
  }

  /** Claims as many due deliveries as the endpoint has free slots, and starts them. */
  async #claim(endpoint: DeliveryEndpoint, ref: EndpointRef, now: number): Promise<void> {
    const { id } = endpoint;
    const free = endpoint.maxInFlight - (this.#inFlight.get(id) ?? 0) - (this.#claiming.get(id) ?? 0);
    if (this.#stopped.has(id) || free <= 0 || this.#abandoned) return;
    this.#claiming.set(id, (this.#claiming.get(id) ?? 0) + free);
    let claimed: ClaimedDelivery[];
    try {
      const owner = `${this.#replica}:${++this.#claims}`;
      claimed = await this.#options.store.claimDue(ref, { now, leaseMs: endpoint.timeoutMs + LEASE_MARGIN_MS, limit: free, owner });
    } finally {
      this.#claiming.set(id, (this.#claiming.get(id) ?? free) - free);
    }
    if (claimed.length === free) this.#full.add(id);
    else this.#full.delete(id);
    for (const delivery of claimed) this.#start(endpoint, ref, delivery);
  }

  /** A slot of a full endpoint was freed: claim again now (the endpoint as configured now; a removed one is left). */
  #refill(endpointId: string): void {
    if (!this.#running || !this.#full.has(endpointId)) return;
    const endpoint = this.#options.endpoints().find((candidate) => candidate.id === endpointId);
    if (!endpoint) return;
    const ref: EndpointRef = { issuingAccount: endpoint.issuingAccount, endpointId };
    // A store that does not answer: the next round tries again, and logs it.
    this.#claim(endpoint, ref, this.#options.clock.now()).catch(() => this.#full.delete(endpointId));
  }

  /**
   * Claims what is due for the named endpoints now (every one when none is named), without
   * refreshing the gauges: the nudge after new events, for the endpoints they were queued for
   * (the rounds keep the gauges). Resolves once the sends are started.
   */
  async claimNow(endpointIds?: ReadonlySet<string>): Promise<void> {
    const now = this.#options.clock.now();
    const chosen = this.#options.endpoints().filter((endpoint) => !endpointIds || endpointIds.has(endpoint.id));
    await Promise.allSettled(chosen.map((endpoint) => this.#claim(endpoint, { issuingAccount: endpoint.issuingAccount, endpointId: endpoint.id }, now)));
  }

  #start(endpoint: DeliveryEndpoint, ref: EndpointRef, delivery: ClaimedDelivery): void {
    this.#inFlight.set(endpoint.id, (this.#inFlight.get(endpoint.id) ?? 0) + 1);
    const send: Promise<void> = this.#deliver(endpoint, ref, delivery)
      .catch((error: unknown) => {
        // The store did not take the settlement: the lease ends and the delivery is sent again.
        this.#options.logger.warn(
          { endpoint: endpoint.id, eventId: delivery.eventId, err: errorSummary(error) },
          'webhook delivery not settled; sent again after its lease',
        );
      })
      .finally(() => {
        this.#inFlight.set(endpoint.id, (this.#inFlight.get(endpoint.id) ?? 1) - 1);
        this.#sends.delete(send);
        this.#refill(endpoint.id);
      });
    this.#sends.add(send);
  }

  async #deliver(endpoint: DeliveryEndpoint, ref: EndpointRef, delivery: ClaimedDelivery): Promise<void> {
    const { clock, sender, metrics, store, logger, retentionMs } = this.#options;
    const labels = { endpoint: endpoint.id };
    const started = performance.now();
    let result: SendResult;
    try {
      result = await sender.send(endpoint, { id: delivery.eventId, json: delivery.json }, clock.now());
    } catch {
      result = { outcome: 'error', error: 'request failed' };
    }
    if (result.outcome !== 'refused') metrics.deliveryDuration.observe(labels, (performance.now() - started) / 1000);
    if (this.#abandoned) return;

    const now = clock.now();
    const { settlement, outcome } = this.#decide(result, delivery.attempts + 1, now);
    metrics.deliveries.inc({ endpoint: endpoint.id, outcome });
    if (outcome === 'gone') this.#stopAfterGone(endpoint);
    if (settlement.kind === 'failed')
      logger.warn(
        { endpoint: endpoint.id, eventId: delivery.eventId, attempts: delivery.attempts + 1, lastError: settlement.error },
        'webhook delivery failed every attempt; kept for redelivery',
      );
    const settled = await store.settle(ref, delivery.eventId, delivery.owner, settlement, { now, keepUntil: now + retentionMs });
    if (!settled) logger.info({ endpoint: endpoint.id, eventId: delivery.eventId }, 'webhook delivery answered after its lease ended; another replica has it');
  }

  #decide(result: SendResult, attemptsMade: number, now: number): { settlement: DeliverySettlement; outcome: DeliveryOutcome } {
    switch (result.outcome) {
      case 'delivered':
        return { settlement: { kind: 'delivered' }, outcome: 'delivered' };
      case 'gone':
        // The endpoint, not the delivery, is at fault: it waits, due at once, for the endpoint's return.
        return { settlement: { kind: 'retry', dueAt: now, error: 'status 410' }, outcome: 'gone' };
      default: {
        const delay = nextAttemptDelay(attemptsMade, this.#random);
        const settlement: DeliverySettlement =
          delay === undefined ? { kind: 'failed', error: result.error } : { kind: 'retry', dueAt: now + delay, error: result.error };
        const outcome: DeliveryOutcome = result.outcome === 'refused' ? 'refused' : settlement.kind === 'failed' ? 'failed' : 'retry';
        return { settlement, outcome };
      }
    }
  }

  #stopAfterGone(endpoint: DeliveryEndpoint): void {
    if (this.#stopped.has(endpoint.id)) return;
    this.#stopped.add(endpoint.id);
    this.#options.metrics.endpointStopped.set({ endpoint: endpoint.id }, 1);
    this.#options.logger.warn(
      { endpoint: endpoint.id, issuingAccount: endpoint.issuingAccount },
      'webhook endpoint answered 410 Gone: deliveries to it are stopped until the next config reload',
    );
  }
}

/** An error as a log line may show it: its name and code, never a message that could quote a URL. */
function errorSummary(error: unknown): { type: string; code?: string } {
  const { name, code } = (error ?? {}) as { name?: unknown; code?: unknown };
  return { type: typeof name === 'string' ? name : typeof error, ...(typeof code === 'string' && { code }) };
}
