import { Cluster } from 'ioredis';
import { withDeadline } from '../../foundation/deadline.js';
import { noFailedOperations, StoreUnavailableError, type StoreFailure, type StoreFailureReason } from '../store-types.js';
import type { OperationOutcomes } from './record-context.js';
import type { StoreClient } from './redis-client.js';
import { evictingPolicies, judgeServers, memoryUsedRatio, nameFailure, NOT_CONNECTED, storeLate } from './server-state.js';
import type { StoreEvents } from './store-events.js';
import type { MasterWatch } from './master-watch.js';

/** Health checks while the store is up and nothing waits for repair; faster while down or repairing. */
const MONITOR_INTERVAL_MS = 1000;
const FAST_MONITOR_INTERVAL_MS = 250;
/** A failed request triggers a health check at most this often (one line per change, not per request). */
const SUSPECT_DEBOUNCE_MS = 200;

/** Work that waits for the store to answer (the repair queue): run on every tick and as soon as the store is up. */
export interface PendingWork {
  readonly size: number;
  run(): Promise<void>;
}

export interface HealthMonitorOptions {
  commandTimeoutMs: number;
  /** D54: an evicting `maxmemory-policy` counts as down (`refuse`), or only emits an event (`warn`). */
  refuseEvicting: boolean;
  /** Health-check periods while up / while down or repairing (default 1000 / 250 ms). */
  monitorIntervalMs?: number | undefined;
  fastMonitorIntervalMs?: number | undefined;
}

/** What the health monitor knows of the store now (StoreDescription's share of it). */
export interface HealthState {
  up: boolean;
  failure: StoreFailure | undefined;
  evictingPolicy: string | undefined;
  memoryUsedRatio: number | undefined;
  failedOperations: Record<StoreFailureReason, number>;
}

/**
 * Whether the store can serve (D54, D55): health checks on a timer, prompted by connection
 * events and failed operations, one event per change (down with its reason, up, an evicting
 * policy). Every store operation reports to it (OperationOutcomes).
 */
export class HealthMonitor implements OperationOutcomes {
  readonly #client: StoreClient;
  readonly #topology: MasterWatch;
  readonly #events: StoreEvents;
  readonly #pending: PendingWork;
  readonly #commandTimeoutMs: number;
  readonly #refuseEvicting: boolean;
  readonly #monitorIntervalMs: number;
  readonly #fastMonitorIntervalMs: number;

  #up: boolean | undefined;
  #failure: StoreFailure = { reason: 'unreachable', detail: 'no answer yet' };
  /** The client's last connection error since it was last ready (NOAUTH, WRONGPASS, ECONNREFUSED...). */
  #connectionError: Error | undefined;
  #evictingPolicy: string | undefined;
  #memoryUsedRatio: number | undefined;
  /** Redis refused a write with OOM, and memory has not had room since (server-state.ts's margin). */
  #refusedWrites = false;
  readonly #failedOperations = noFailedOperations();
  #checking: Promise<StoreFailure | undefined> | undefined;
  /** A check was asked for while one ran (a reconnection, a success while down): one more after it. */
  #recheck = false;
  #lastCheckAt = 0;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(client: StoreClient, topology: MasterWatch, events: StoreEvents, pending: PendingWork, options: HealthMonitorOptions) {
    this.#client = client;
    this.#topology = topology;
    this.#events = events;
    this.#pending = pending;
    this.#commandTimeoutMs = options.commandTimeoutMs;
    this.#refuseEvicting = options.refuseEvicting;
    this.#monitorIntervalMs = options.monitorIntervalMs ?? MONITOR_INTERVAL_MS;
    this.#fastMonitorIntervalMs = options.fastMonitorIntervalMs ?? FAST_MONITOR_INTERVAL_MS;
    this.#watch(client);
    // A client still connecting is checked when it is ready (or when its connection fails), not
    // before: a check now would only find it not connected yet.
    this.#schedule(client.status === 'ready' ? 0 : this.#fastMonitorIntervalMs);
  }

  get state(): HealthState {
    return {
      up: this.#up === true,
      failure: this.#up === false ? this.#failure : undefined,
      evictingPolicy: this.#evictingPolicy,
      memoryUsedRatio: this.#memoryUsedRatio,
      failedOperations: { ...this.#failedOperations },
    };
  }

  /** Checks now (one check at a time): the failure found, or the known one while down; undefined when up. */
  async failureNow(): Promise<StoreFailure | undefined> {
    return (await this.#check()) ?? (this.#up === true ? undefined : this.#failure);
  }

  /**
   * A store operation failed: named (D55), counted, a check prompted, and the error to throw
   * (503). A write refused for memory makes the store out of memory at once (D54): Redis knows
   * better than INFO read at rest, which often shows a full server just under its limit.
   */
  failed(error: unknown): StoreUnavailableError {
    const failure = nameFailure(error, this.#connectionError);
    this.#failedOperations[failure.reason] += 1;
    if (failure.reason === 'out_of_memory' && !this.#refusedWrites) {
      this.#refusedWrites = true;
      this.#checkSoon();
    } else {
      this.suspect();
    }
    return new StoreUnavailableError(error, failure);
  }

  /**
   * A store operation succeeded. A write Redis accepted means it has memory for writes again;
   * while the store counts as down, any answer is worth a check now.
   */
  succeeded(wrote: boolean): void {
    if (wrote) this.#refusedWrites = false;
    if (this.#up === false && this.#failure.reason !== 'evicting_policy') this.#checkSoon();
  }

  /** A request failed or a connection dropped: check now rather than at the next tick. */
  suspect(): void {
    if (this.#closed || this.#checking || performance.now() - this.#lastCheckAt < SUSPECT_DEBOUNCE_MS) return;
    void this.#check();
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
  }

  /**
   * Connection events only prompt a health check; the check decides (one event per change).
   * Attached in the constructor, in the same turn as the client was made: ioredis connects on a
   * later turn, so even the first connection error (a wrong password at start) is kept.
   */
  #watch(client: StoreClient): void {
    // Without a listener ioredis prints every failed reconnect attempt; the monitor reports instead.
    client.on('error', (error: Error) => this.#connectionFailed(error));
    client.on('end', () => this.suspect());
    if (client instanceof Cluster) {
      client.on('node error', (error: Error) => this.#connectionFailed(error));
      client.on('-node', () => this.suspect());
      client.on('refresh', () => this.#slotsRefreshed());
      client.on('ready', () => {
        this.#connected();
        this.#slotsRefreshed();
      });
      return;
    }
    // Reconnected: served again from now on, so said so now, not at the next scheduled check.
    client.on('ready', () => {
      // Sentinel: the server reached is the master now (a connection without an address says nothing yet).
      if (this.#topology.kind !== 'standalone' && !this.#topology.sentinelConnected()) return;
      this.#connected();
    });
  }

  /** A connection attempt failed, saying why: checked now (attempts come at most every 50 to 500 ms). */
  #connectionFailed(error: Error): void {
    this.#connectionError = error;
    this.#checkSoon();
  }

  /** (Re)connected: served again from now on, so checked now, not at the next scheduled check. */
  #connected(): void {
    this.#connectionError = undefined;
    this.#checkSoon();
  }

  #slotsRefreshed(): void {
    if (this.#topology.slotsRefreshed()) this.suspect();
  }

  /**
   * One health check at a time; its result is the store's state (D54, D55), and what it found
   * (readiness answers by it). A check that finds the connection closed and being made again,
   * with no failed attempt yet, leaves the state as it was: the attempt names the cause (refused,
   * WRONGPASS, ...), or the connection is ready again and the next check judges the server.
   */
  #check(): Promise<StoreFailure | undefined> {
    this.#checking ??= (async () => {
      this.#lastCheckAt = performance.now();
      let failure: StoreFailure | undefined;
      try {
        const servers = await withDeadline(this.#topology.probe(), this.#commandTimeoutMs, storeLate);
        failure = judgeServers(servers, { refuseEvicting: this.#refuseEvicting, refusedWrites: this.#refusedWrites });
        if (failure?.reason !== 'out_of_memory') this.#refusedWrites = false;
        this.#memoryUsedRatio = memoryUsedRatio(servers);
        const policy = evictingPolicies(servers);
        if (policy !== this.#evictingPolicy) {
          this.#evictingPolicy = policy;
          // Refused (production), the policy is the store's failure, reported as such.
          if (!this.#refuseEvicting) this.#events.emit({ kind: 'evicting-policy', policy });
        }
      } catch (error) {
        failure = nameFailure(error, this.#connectionError);
        // Down already, the known reason stands (a read-only master drops every connection a write met).
        if (failure.detail === NOT_CONNECTED && this.#client.status !== 'end') return this.#up === false ? this.#failure : failure;
      }
      this.#setState(failure);
      return failure;
    })().finally(() => {
      this.#checking = undefined;
      if (this.#recheck && !this.#closed) {
        this.#recheck = false;
        void this.#check();
      }
    });
    return this.#checking;
  }

  /**
   * One event per change: down (with the reason) and up. Unreachable and timed out are one
   * state for the log (a dying connection goes through both); any other new reason is a change.
   */
  #setState(failure: StoreFailure | undefined): void {
    const up = failure === undefined;
    const previous = this.#up === false ? this.#failure.reason : undefined;
    if (failure) this.#failure = failure;
    if (this.#up === up && (up || connectivity(previous) === connectivity(failure?.reason))) return;
    this.#up = up;
    this.#events.emit(failure ? { kind: 'down', ...failure } : { kind: 'up' });
    if (up) void this.#pending.run();
  }

  /**
   * The store answers again (a reconnection, a command that succeeded while down): check now,
   * without the debounce, and once more after a check already running (it may have started
   * before the connection was back). Recovery is seen at once, not at the next tick.
   */
  #checkSoon(): void {
    if (this.#closed) return;
    if (this.#checking) this.#recheck = true;
    else void this.#check();
  }

  #schedule(ms: number): void {
    if (this.#closed) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.#tick(), ms);
    // The monitor never keeps a process alive on its own.
    this.#timer.unref();
  }

  async #tick(): Promise<void> {
    await this.#check();
    if (this.#up === true) await this.#topology.follow();
    await this.#pending.run();
    this.#schedule(this.#up === true && this.#pending.size === 0 ? this.#monitorIntervalMs : this.#fastMonitorIntervalMs);
  }
}

/** Unreachable and timed out are one state for the log: a connection that dies goes through both. */
function connectivity(reason: StoreFailureReason | undefined): string | undefined {
  return reason === 'timed_out' ? 'unreachable' : reason;
}
