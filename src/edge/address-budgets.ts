import ipaddr from 'ipaddr.js';
import type { Clock } from '../foundation/clock.js';

/** D53, D59: what one client address may take of one replica, per second and at once. */
export interface PerAddressLimits {
  readonly requestsPerSecond: number;
  readonly inFlight: number;
  readonly connectionsPerSecond: number;
  /** D59: connections of one address open at once. */
  readonly connections: number;
}

/** Why a connection was refused at accept: over the new-connection rate, or over the open connections (D59). */
export type ConnectionRefusal = 'connections_per_second' | 'open_connections';

/** Why a request or a connection was refused: the metrics' `reason`, never the address. */
export type BudgetRefusal = 'requests_per_second' | 'in_flight' | ConnectionRefusal;

/** A refused request: why, and how long until the address's one-second window ends (1 to 1000 ms, by the injected clock). */
export interface RequestRefusal {
  readonly reason: Exclude<BudgetRefusal, ConnectionRefusal>;
  readonly windowLeftMs: number;
}

/** A connection's admission: refused (why), or admitted, with what to call once it closes. */
export type ConnectionAdmission = { readonly refused: ConnectionRefusal } | { readonly refused: undefined; closed(): void };

interface Usage {
  /** Start (injected clock, ms) of the one-second window the counts below belong to. */
  window: number;
  requests: number;
  connections: number;
  inFlight: number;
  /** Connections of the address open now (D59): not reset with the window. */
  open: number;
}

/** Addresses tracked at most; past it the idle ones are dropped at once, then new ones share one entry. */
const MAX_TRACKED = 100_000;
const WINDOW_MS = 1000;
/** Shared by every new address while the table is full of busy ones: they are budgeted together. */
const OVERFLOW = '(overflow)';

/**
 * IPv6 clients are budgeted per /64 (the smallest block a site is given, so an attacker holds
 * a whole /64); IPv4 per address. The address is already canonical (client-origin.ts).
 */
export function budgetKey(address: string): string {
  if (!address.includes(':')) return address;
  try {
    const parts = ipaddr.IPv6.parse(address).parts;
    return `${parts
      .slice(0, 4)
      .map((part) => part.toString(16))
      .join(':')}::/64`;
  } catch {
    return address;
  }
}

/**
 * Per-address request and connection budgets, local to this replica (D53): no store round trip,
 * so a refusal costs a map lookup. Windows are fixed seconds of the injected clock, so a burst
 * across a window edge can reach twice the rate for an instant (the same as the login limits).
 * An address's entry lives while it has requests in flight, connections open or counts in the
 * current window.
 */
export class AddressBudgets {
  readonly #usage = new Map<string, Usage>();
  #sweptAt = 0;

  constructor(
    private readonly limits: () => PerAddressLimits,
    private readonly clock: Clock,
  ) {}

  /**
   * Counts a new connection from `address`: refused over `connectionsPerSecond` (new ones this
   * second) or over `connections` (open at once, D59), else admitted until `closed` is called.
   * A refused connection counts towards neither.
   */
  admitConnection(address: string): ConnectionAdmission {
    const usage = this.#use(address);
    const limits = this.limits();
    if (usage.connections >= limits.connectionsPerSecond) return { refused: 'connections_per_second' };
    if (usage.open >= limits.connections) return { refused: 'open_connections' };
    usage.connections += 1;
    usage.open += 1;
    let closed = false;
    // The entry itself, not a lookup by key: an address budgeted in the overflow entry is released there.
    return {
      refused: undefined,
      closed: () => {
        if (closed) return;
        closed = true;
        usage.open -= 1;
      },
    };
  }

  /**
   * Counts a request from `address`: undefined when admitted (then `finished` must be called
   * once it is answered), else the budget it is over and when its window ends. A refused request
   * counts too: a client that keeps sending past its budget stays refused.
   */
  admitRequest(address: string): RequestRefusal | undefined {
    const usage = this.#use(address);
    const limits = this.limits();
    usage.requests += 1;
    const over = usage.requests > limits.requestsPerSecond ? 'requests_per_second' : usage.inFlight >= limits.inFlight ? 'in_flight' : undefined;
    if (over === undefined) {
      usage.inFlight += 1;
      return undefined;
    }
    return { reason: over, windowLeftMs: usage.window + WINDOW_MS - this.clock.now() };
  }

  /** An admitted request of `address` was answered (or its connection closed). */
  finished(address: string): void {
    const usage = this.#usage.get(budgetKey(address));
    if (usage && usage.inFlight > 0) usage.inFlight -= 1;
  }

  /** Addresses tracked now (tests, and a bound on memory). */
  get tracked(): number {
    return this.#usage.size;
  }

  #use(address: string): Usage {
    const now = this.clock.now();
    if (now - this.#sweptAt >= WINDOW_MS) this.#sweep(now);
    let key = budgetKey(address);
    let usage = this.#usage.get(key);
    if (!usage) {
      if (this.#usage.size >= MAX_TRACKED) {
        this.#sweep(now);
        if (this.#usage.size >= MAX_TRACKED) key = OVERFLOW;
      }
      usage = this.#usage.get(key);
      if (!usage) this.#usage.set(key, (usage = { window: now, requests: 0, connections: 0, inFlight: 0, open: 0 }));
    }
    if (now - usage.window >= WINDOW_MS || now < usage.window) {
      usage.window = now;
      usage.requests = 0;
      usage.connections = 0;
    }
    return usage;
  }

  /** Drops the entries with nothing in flight or open whose window has ended: at most once a second. */
  #sweep(now: number): void {
    this.#sweptAt = now;
    for (const [key, usage] of this.#usage) {
      if (usage.inFlight === 0 && usage.open === 0 && now - usage.window >= WINDOW_MS) this.#usage.delete(key);
    }
  }
}
