import type { Socket } from 'node:net';

/** Runs `fire` after `ms`, unless the returned function is called first. Tests inject their own. */
export type DeadlineTimer = (ms: number, fire: () => void) => () => void;

/** The timer a gateway uses outside tests: it never keeps the process alive by itself. */
export const unrefTimer: DeadlineTimer = (ms, fire) => {
  const timer = setTimeout(fire, ms);
  timer.unref();
  return () => clearTimeout(timer);
};

interface Awaiting {
  /** The socket HTTP is spoken on: the raw one (plain listener) or its TLS socket once the handshake is done. */
  http: Socket | undefined;
  cancel: () => void;
}

/** One connection, as its raw and its TLS socket both report it: they share both ends. */
const connectionKey = (socket: Socket): string => `${socket.localAddress}|${socket.localPort}|${socket.remoteAddress}|${socket.remotePort}`;

/**
 * D59: a connection that has not sent its first request (request line and headers, TLS handshake
 * included) within `ms` of being accepted is closed, so an address cannot hold connections that
 * cost a slot and do nothing. `late` is handed the socket to close; a connection whose TLS
 * handshake is still under way has none yet, and is closed by the TLS handshake deadline, which
 * the listener sets no longer than this one.
 *
 * The raw socket is accepted before TLS wraps it and a request only ever sees the TLS socket; the
 * two are matched by the connection's addresses and ports, which they share, rather than by
 * Node's internal link between them.
 */
export class FirstRequestDeadline {
  readonly #awaiting = new Map<string, Awaiting>();
  /** HTTP sockets whose first request has arrived: later requests cost one lookup. */
  readonly #served = new WeakSet<Socket>();

  constructor(
    private readonly ms: number,
    private readonly timer: DeadlineTimer,
    private readonly late: (socket: Socket) => void,
  ) {}

  /** An admitted raw connection; `plain`: HTTP is spoken on it directly (no TLS). */
  accepted(raw: Socket, plain: boolean): void {
    if (raw.remoteAddress === undefined) return; // already gone
    const key = connectionKey(raw);
    const entry: Awaiting = { http: plain ? raw : undefined, cancel: () => undefined };
    this.#awaiting.set(key, entry);
    entry.cancel = this.timer(this.ms, () => {
      if (this.#awaiting.get(key) !== entry) return;
      this.#awaiting.delete(key);
      if (entry.http !== undefined && !entry.http.destroyed) this.late(entry.http);
    });
    raw.once('close', () => {
      entry.cancel();
      if (this.#awaiting.get(key) === entry) this.#awaiting.delete(key);
    });
  }

  /** The TLS handshake of an accepted connection is done: HTTP goes over `socket` from now on. */
  secured(socket: Socket): void {
    const entry = this.#awaiting.get(connectionKey(socket));
    if (entry !== undefined) entry.http = socket;
  }

  /** A request arrived on `socket`: if it is the connection's first, its deadline is met. */
  requestArrived(socket: Socket): void {
    if (this.#served.has(socket)) return;
    this.#served.add(socket);
    const key = connectionKey(socket);
    const entry = this.#awaiting.get(key);
    if (entry === undefined) return;
    entry.cancel();
    this.#awaiting.delete(key);
  }

  /** Connections still waiting for their first request (tests). */
  get waiting(): number {
    return this.#awaiting.size;
  }
}
