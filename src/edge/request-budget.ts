import { randomUUID } from 'node:crypto';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { AddressRanges } from '../foundation/address-ranges.js';
import type { Clock } from '../foundation/clock.js';
import { errors, toEnvelope } from '../foundation/errors.js';
import type { AddressBudgets, BudgetRefusal } from './address-budgets.js';
import { resolveClientOrigin, type ClientOrigin } from './client-origin.js';

type Handler = RequestListener<typeof IncomingMessage, typeof ServerResponse>;

/** Refusals on one connection after which the refusal also closes it (D53). */
export const REFUSALS_BEFORE_CLOSE = 3;

/** Each request's client origin, resolved once by the budget and read again by the edge guard. */
const origins = new WeakMap<IncomingMessage, ClientOrigin>();

/** The origin the request budget resolved for `request`, if it ran. */
export const resolvedOrigin = (request: IncomingMessage): ClientOrigin | undefined => origins.get(request);

export interface RequestBudgetDeps {
  budgets: AddressBudgets;
  ranges(): { allowlist: AddressRanges; trustedProxies: AddressRanges };
  clock: Clock;
  requestsPerSecond(): number;
  refused(reason: BudgetRefusal): void;
  /** A 429 was written (a held one once its hold ends; never for a client that left first). */
  answered(method: string): void;
  /** Answers a held refusal after `ms`; returns what cancels it ({@link holdWithTimer} outside tests). */
  holdRefusal: RefusalHold;
}

/** Runs `answer` after `ms`, unless the returned function is called first. */
export type RefusalHold = (ms: number, answer: () => void) => () => void;

export const holdWithTimer: RefusalHold = (ms, answer) => {
  const timer = setTimeout(answer, ms);
  return () => clearTimeout(timer);
};

/**
 * D53, in front of Fastify's handler: a request from an allowlisted address past its budget is
 * answered 429 here, before routing, hooks, body reading, the store or the token check run. An
 * address outside the allowlist is left to the edge guard's 403 (D10 comes first), and its
 * connections have their own cap.
 *
 * A client that ignores Retry-After is slowed, not just refused. The first refusal on a
 * connection is answered at once. The ones after it are held until the address's budget second
 * ends (at most 1 s), so an attacking connection gets about one answer a second instead of one
 * as fast as it can ask: a held refusal costs a timer, where an answered one invites the next
 * request (measured under the benchmark's attack: the legitimate load kept 0.82-0.91x of its
 * throughput, against 0.69-0.71x when every refusal was answered at once). After
 * REFUSALS_BEFORE_CLOSE refusals on one connection the refusal closes it, so going on costs a
 * new TLS handshake (and the connection budget).
 */
export function budgetRequests(handler: Handler, deps: RequestBudgetDeps): Handler {
  const refusalsOn = new WeakMap<Socket, number>();
  return (request, response) => {
    const socket = request.socket;
    const ranges = deps.ranges();
    const origin = resolveClientOrigin(socket.remoteAddress, (socket as { encrypted?: boolean }).encrypted === true, request.headers, ranges.trustedProxies);
    origins.set(request, origin);
    const address = origin.address;
    if (address === undefined || !ranges.allowlist.contains(address)) {
      handler(request, response);
      return;
    }
    const refusal = deps.budgets.admitRequest(address);
    if (refusal === undefined) {
      let finished = false;
      const finish = () => {
        if (finished) return;
        finished = true;
        deps.budgets.finished(address);
      };
      response.once('finish', finish);
      response.once('close', finish);
      handler(request, response);
      return;
    }
    deps.refused(refusal.reason);
    const refusals = (refusalsOn.get(socket) ?? 0) + 1;
    refusalsOn.set(socket, refusals);
    const answer = () => refuse(response, refusal.reason, refusals >= REFUSALS_BEFORE_CLOSE, deps);
    if (refusals === 1) return answer();
    // A client that leaves meanwhile ends the hold: nothing is kept for a closed socket.
    response.once('close', deps.holdRefusal(refusal.windowLeftMs, answer));
  };
}

/** The 429 envelope (retryAfter 1: every budget is per second or clears as answers go out). */
function refuse(response: ServerResponse, refusal: BudgetRefusal, close: boolean, deps: RequestBudgetDeps): void {
  const correlationId = randomUUID();
  const body = JSON.stringify(toEnvelope(errors.rateLimited(1), correlationId, deps.clock.now()));
  const headers: Record<string, string | number> = {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'x-correlation-id': correlationId,
    'retry-after': '1',
  };
  if (refusal === 'requests_per_second') {
    const limit = deps.requestsPerSecond();
    headers['ratelimit-policy'] = `"address";q=${limit};w=1`;
    headers['ratelimit'] = `"address";r=0;t=1`;
    headers['ratelimit-limit'] = String(limit);
    headers['ratelimit-remaining'] = '0';
    headers['ratelimit-reset'] = '1';
  }
  // The body is never read: a connection that is not closed has it discarded by Node.
  if (close) headers['connection'] = 'close';
  response.writeHead(429, headers);
  response.end(body);
  deps.answered(response.req.method ?? 'GET');
}
