import { Agent } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { holdWithTimer, REFUSALS_BEFORE_CLOSE, type RefusalHold } from '../../src/edge/request-budget.js';
import { CountingStore } from '../support/counting-store.js';
import { testCertificatePem, testConfig } from '../support/gateway-fixture.js';
import { waitFor } from '../support/wait.js';
import { call, CARDS_PATH, INSIDER, listenTestGateway, metricSum, openTls, SECOND_INSIDER, SocketPool, type ListeningGateway } from './support.js';

/**
 * D53: per-address budgets of one replica, on the real TLS listener with an injected clock
 * (windows are seconds of that clock; nothing here is timed). Past a request budget the answer
 * is 429 before any routing work: the route never runs (its invocations are counted), the store
 * is never called (counted at its port), a bogus token is never looked at (429, not 401).
 * Past the connection budget the socket is closed before the TLS handshake: the client's
 * `secureConnect` never fires.
 */

const LIMITS = { requestsPerSecond: 5, inFlight: 2, connectionsPerSecond: 3 };
const COUNT_PATH = '/test/budget/count';
const HOLD_PATH = '/test/budget/hold';

let listening: ListeningGateway;
let clock: ManualClock;
let store: CountingStore;
let ca: string;
const pool = new SocketPool();
const agents: Agent[] = [];
let invocations = 0;
const held: (() => void)[] = [];

/**
 * The refusals the gateway held (a refusal after the first on a connection waits for the
 * address's second to end): how long each was to wait by the injected clock, and whether its
 * client left first. Answered at once unless a test holds them itself.
 */
const holds: { ms: number; answer: () => void; cancelled: boolean }[] = [];
let answerHoldsAtOnce = true;
const holdRefusal: RefusalHold = (ms, answer) => {
  const hold = { ms, answer, cancelled: false };
  holds.push(hold);
  if (answerHoldsAtOnce) setImmediate(answer);
  return () => {
    hold.cancelled = true;
  };
};

beforeAll(async () => {
  ca = await testCertificatePem();
  clock = new ManualClock(Date.UTC(2026, 0, 1));
  store = new CountingStore(new MemoryStore(() => clock.now()));
  listening = await listenTestGateway({
    clock,
    store,
    overrides: { limits: { perAddress: LIMITS } },
    holdRefusal,
    extend: {
      public: (scope) => {
        scope.get(COUNT_PATH, { schema: { hide: true } }, async () => {
          invocations += 1;
          return { ok: true };
        });
        scope.get(HOLD_PATH, { schema: { hide: true } }, async () => {
          invocations += 1;
          await new Promise<void>((resolve) => held.push(resolve));
          return { ok: true };
        });
      },
    },
  });
});

afterAll(async () => {
  pool.destroyAll();
  await listening?.close();
});

beforeEach(() => {
  // A fresh second of the injected clock: every window starts empty.
  clock.advance(10_000);
  invocations = 0;
  store.reset();
  holds.length = 0;
  answerHoldsAtOnce = true;
});

afterEach(() => {
  for (const release of held.splice(0)) release();
  for (const agent of agents.splice(0)) agent.destroy();
});

/** A keep-alive client from `localAddress` over at most `sockets` connections. */
function client(localAddress: string, sockets = 1): Agent {
  const agent = new Agent({ keepAlive: true, maxSockets: sockets, ca, localAddress });
  agents.push(agent);
  return agent;
}

const refusals = async (reason: string): Promise<number> =>
  metricSum(await listening.gw.gateway.metrics.registry.metrics(), 'gateway_address_budget_refusals_total', { reason }) ?? 0;
/** D62: the per-address 429s written, as the request metrics count them (decided before routing: route `unrouted`). */
const answered429 = async (): Promise<number> =>
  metricSum(await listening.gw.gateway.metrics.registry.metrics(), 'gateway_http_requests_total', { route: 'unrouted', status_code: '429' }) ?? 0;

describe('per-address request budget (limits.perAddress.requestsPerSecond)', () => {
  it('admits requestsPerSecond requests of one address in a second; the next is 429 before the route, the store or the token check runs', async () => {
    const agent = client(INSIDER);
    const before = await refusals('requests_per_second');
    const answeredBefore = await answered429();
    for (let i = 0; i < LIMITS.requestsPerSecond; i += 1) expect((await call(`${listening.httpsUrl}${COUNT_PATH}`, { agent })).status).toBe(200);
    expect(invocations).toBe(LIMITS.requestsPerSecond);

    const refused = await call(`${listening.httpsUrl}${COUNT_PATH}`, { agent });
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.body)).toMatchObject({ status: 429, code: 'rate_limited', retryAfter: 1 });
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.headers['ratelimit-policy']).toBe(`"address";q=${LIMITS.requestsPerSecond};w=1`);
    expect(refused.headers['ratelimit']).toBe('"address";r=0;t=1');
    expect(invocations).toBe(LIMITS.requestsPerSecond);

    // A card request with a forged token and a body: 429, not 401, and no store call.
    const card = await call(`${listening.httpsUrl}${CARDS_PATH}`, { agent, headers: { authorization: 'Bearer not-a-token' }, body: '{"requestId":"x"}' });
    expect(card.status).toBe(429);
    expect(store.counted()).toEqual({});
    expect((await refusals('requests_per_second')) - before).toBe(2);
    // Both 429s are in the request metrics, as a GET and a POST answered before routing.
    expect((await answered429()) - answeredBefore).toBe(2);
    const text = await listening.gw.gateway.metrics.registry.metrics();
    expect(metricSum(text, 'gateway_http_requests_total', { method: 'POST', route: 'unrouted', status_code: '429' })).toBe(1);
    // The first refusal on the connection was answered at once, the second held for what was
    // left of the address's second (all of it: the clock has not moved).
    expect(holds.map((hold) => hold.ms)).toEqual([1000]);

    // Another address has its own budget.
    expect((await call(`${listening.httpsUrl}${COUNT_PATH}`, { agent: client(SECOND_INSIDER) })).status).toBe(200);

    // Just inside the next second the window is still full; at the second it is empty again.
    clock.advance(999);
    expect((await call(`${listening.httpsUrl}${COUNT_PATH}`, { agent })).status).toBe(429);
    expect(holds.map((hold) => hold.ms)).toEqual([1000, 1]);
    clock.advance(1);
    expect((await call(`${listening.httpsUrl}${COUNT_PATH}`, { agent })).status).toBe(200);
    expect(invocations).toBe(LIMITS.requestsPerSecond + 2);
  });

  it(`closes the connection with the refusal after ${REFUSALS_BEFORE_CLOSE} refusals on it, not before`, async () => {
    const agent = client(INSIDER);
    for (let i = 0; i < LIMITS.requestsPerSecond; i += 1) await call(`${listening.httpsUrl}${COUNT_PATH}`, { agent });
    const answers = [];
    for (let i = 0; i < REFUSALS_BEFORE_CLOSE; i += 1) answers.push(await call(`${listening.httpsUrl}${COUNT_PATH}`, { agent }));
    expect(answers.map((answer) => answer.status)).toEqual(Array(REFUSALS_BEFORE_CLOSE).fill(429));
    expect(answers.slice(0, -1).map((answer) => answer.headers['connection'])).toEqual(Array(REFUSALS_BEFORE_CLOSE - 1).fill('keep-alive'));
    expect(answers.at(-1)?.headers['connection']).toBe('close');
    expect(holds).toHaveLength(REFUSALS_BEFORE_CLOSE - 1);
  });

  it("holds a refusal after the first on a connection until the address's second ends, while other addresses are served; a client that leaves ends the hold", async () => {
    answerHoldsAtOnce = false;
    const agent = client(INSIDER);
    for (let i = 0; i < LIMITS.requestsPerSecond; i += 1) expect((await call(`${listening.httpsUrl}${COUNT_PATH}`, { agent })).status).toBe(200);
    clock.advance(300);
    // A client told once is told at once.
    expect((await call(`${listening.httpsUrl}${COUNT_PATH}`, { agent })).status).toBe(429);
    expect(holds).toHaveLength(0);

    clock.advance(100);
    let heard = false;
    const second = call(`${listening.httpsUrl}${COUNT_PATH}`, { agent }).then((answer) => {
      heard = true;
      return answer;
    });
    await waitFor('the second refusal to be held', () => holds.length === 1);
    expect(holds[0]!.ms).toBe(600);
    // Another address is served meanwhile, and the held client has still heard nothing.
    expect((await call(`${listening.httpsUrl}${COUNT_PATH}`, { agent: client(SECOND_INSIDER) })).status).toBe(200);
    expect(heard).toBe(false);
    holds[0]!.answer();
    const refused = await second;
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.headers['connection']).toBe('keep-alive');
    expect(invocations).toBe(LIMITS.requestsPerSecond + 1);

    // The third is held too; its client goes away: the hold is cancelled, nothing is answered,
    // and only the two answers written are counted as requests.
    const answeredBefore = await answered429();
    const third = call(`${listening.httpsUrl}${COUNT_PATH}`, { agent }).catch((error: Error) => error);
    await waitFor('the third refusal to be held', () => holds.length === 2);
    agent.destroy();
    expect(await third).toBeInstanceOf(Error);
    await waitFor('the hold of a client that left to be cancelled', () => holds[1]!.cancelled);
    expect(await answered429()).toBe(answeredBefore);
  });

  it('budgets the client a trusted proxy reports, not the proxy', async () => {
    await listening.gw.gateway.reload(await testConfig({ trustedProxies: [`${INSIDER}/32`], limits: { perAddress: LIMITS } }));
    try {
      const agent = client(INSIDER);
      const from = (address: string) => ({ agent, headers: { 'x-forwarded-for': address, 'x-forwarded-proto': 'https' } });
      for (let i = 0; i < LIMITS.requestsPerSecond; i += 1) expect((await call(`${listening.httpsUrl}${COUNT_PATH}`, from('10.0.0.1'))).status).toBe(200);
      expect((await call(`${listening.httpsUrl}${COUNT_PATH}`, from('10.0.0.1'))).status).toBe(429);
      expect((await call(`${listening.httpsUrl}${COUNT_PATH}`, from('10.0.0.2'))).status).toBe(200);
    } finally {
      await listening.gw.gateway.reload(await testConfig({ trustedProxies: [], limits: { perAddress: LIMITS } }));
    }
  });
});

describe('the hold a gateway uses outside tests (a timer)', () => {
  it('answers a held refusal once its time is up, and never one whose client left first', async () => {
    const answered: string[] = [];
    const cancelLeft = holdWithTimer(0, () => answered.push('left'));
    holdWithTimer(0, () => answered.push('held'));
    cancelLeft();
    // Timers of the same length run in the order they were set: a cancel that did not take would
    // have answered 'left' first.
    await waitFor('the held refusal to be answered', () => answered.length > 0);
    expect(answered).toEqual(['held']);
  });
});

describe('per-address in-flight budget (limits.perAddress.inFlight)', () => {
  it('serves inFlight requests of one address at once; one more is 429 before its route runs, and is admitted once one is answered', async () => {
    const agent = client(INSIDER, LIMITS.inFlight + 1);
    const before = await refusals('in_flight');
    const holding = Array.from({ length: LIMITS.inFlight }, () => call(`${listening.httpsUrl}${HOLD_PATH}`, { agent }));
    await expect.poll(() => held.length, { timeout: 5_000 }).toBe(LIMITS.inFlight);

    const refused = await call(`${listening.httpsUrl}${COUNT_PATH}`, { agent });
    expect(refused.status).toBe(429);
    expect(invocations).toBe(LIMITS.inFlight);
    expect((await refusals('in_flight')) - before).toBe(1);

    held.shift()?.();
    await holding[0];
    expect((await call(`${listening.httpsUrl}${COUNT_PATH}`, { agent })).status).toBe(200);
    expect(invocations).toBe(LIMITS.inFlight + 1);
    for (const release of held.splice(0)) release();
    expect((await Promise.all(holding)).map((answer) => answer.status)).toEqual(Array(LIMITS.inFlight).fill(200));
  });
});

describe('per-address connection budget (limits.perAddress.connectionsPerSecond)', () => {
  /**
   * Whether a TLS connection from `address` completes its handshake. A completed one is ended
   * from its TLS side at once: the budget counts connections opened, not open ones, and a TLS
   * socket left for the pool to destroy under its raw socket can crash Node 20 (SIGSEGV in
   * SSL_read).
   */
  const handshake = (address: string): Promise<TLSSocket | undefined> =>
    openTls(pool, listening.httpsPort, address, ca).then(
      (socket) => {
        socket.destroy();
        return socket;
      },
      () => undefined,
    );

  it('closes the connection past the budget before the TLS handshake; the next second admits again', async () => {
    const before = await refusals('connections_per_second');
    for (let i = 0; i < LIMITS.connectionsPerSecond; i += 1) expect(await handshake(SECOND_INSIDER), `connection ${i + 1}`).toBeDefined();
    // secureConnect never fires: openTls resolves only on it.
    expect(await handshake(SECOND_INSIDER)).toBeUndefined();
    expect((await refusals('connections_per_second')) - before).toBe(1);
    // another address is not affected
    expect(await handshake(INSIDER)).toBeDefined();
    clock.advance(1000);
    expect(await handshake(SECOND_INSIDER)).toBeDefined();
  });
});
