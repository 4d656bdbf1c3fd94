import type { TLSSocket } from 'node:tls';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AcceptRefusalLog, ACCEPT_REFUSAL_LOG_INTERVAL_MS } from '../../src/edge/accept-refusals.js';
import { AddressBudgets, type PerAddressLimits } from '../../src/edge/address-budgets.js';
import type { DeadlineTimer } from '../../src/edge/first-request-deadline.js';
import { ManualClock } from '../../src/foundation/clock.js';
import { testCertificatePem } from '../support/gateway-fixture.js';
import { HANG_GUARD_MS, waitFor } from '../support/wait.js';
import {
  call,
  closedWithin,
  INSIDER,
  JWKS_PATH,
  listenTestGateway,
  mapBounded,
  metricSum,
  openTcp,
  openTls,
  SECOND_INSIDER,
  SocketPool,
  type HttpAnswer,
  type ListeningGateway,
} from './support.js';

/**
 * D59 (issue 31, finding 3): one address holds a bounded share of a replica. Over real TLS
 * sockets from two loopback addresses: at most `limits.perAddress.connections` connections of
 * one address are open at once (the ones past it closed at accept, counted, logged at a bounded
 * rate) while another address is still served; a connection that has not sent its first request
 * by `edge.firstRequestTimeoutMs` is closed; and a client that opens one connection per request
 * is served as far as its request budget goes (`connectionsPerSecond` defaults to the request
 * budget). The clock is injected: a budget second never ends by itself, so nothing here depends
 * on how fast the machine is.
 */

const HOLD_PATH = '/test/share/hold';
/** D59's default. */
const DEFAULT_CONNECTIONS = 128;

let ca: string;
const pool = new SocketPool();
let listening: ListeningGateway | undefined;
const held: (() => void)[] = [];

beforeAll(async () => {
  ca = await testCertificatePem();
});
afterEach(async () => {
  for (const release of held.splice(0)) release();
  pool.destroyAll();
  await listening?.close();
  listening = undefined;
});

/** A listening gateway with a public route that answers only when the test releases it. */
async function start(options: { overrides?: Record<string, unknown>; clock?: ManualClock; firstRequestTimer?: DeadlineTimer } = {}) {
  listening = await listenTestGateway({
    clock: options.clock ?? new ManualClock(Date.UTC(2026, 0, 1)),
    overrides: options.overrides ?? {},
    ...(options.firstRequestTimer && { firstRequestTimer: options.firstRequestTimer }),
    extend: {
      public: (scope) => {
        scope.get(HOLD_PATH, { schema: { hide: true } }, async () => {
          await new Promise<void>((resolve) => held.push(resolve));
          return { ok: true };
        });
      },
    },
  });
  return listening;
}

const metrics = async (gw: ListeningGateway): Promise<string> => gw.gw.gateway.metrics.registry.metrics();
const count = async (gw: ListeningGateway, name: string, labels: Record<string, string>): Promise<number> => metricSum(await metrics(gw), name, labels) ?? 0;

/** The TLS handshake from `address` completes (admitted) or the connection is closed first (refused at accept). */
const admitted = (gw: ListeningGateway, address: string): Promise<TLSSocket | undefined> =>
  openTls(pool, gw.httpsPort, address, ca).then(
    (socket) => socket,
    () => undefined,
  );

/** `n` requests from `address`, each on a connection of its own, held by the route until released. */
async function holdConnections(gw: ListeningGateway, address: string, n: number): Promise<Promise<HttpAnswer>[]> {
  const before = held.length;
  const answers = Array.from({ length: n }, () => call(`${gw.httpsUrl}${HOLD_PATH}`, { ca, localAddress: address }));
  for (const answer of answers) answer.catch(() => undefined);
  await waitFor(`${n} requests from ${address} to be held (${held.length - before} so far)`, () => held.length - before === n);
  return answers;
}

const acceptLines = (gw: ListeningGateway) =>
  gw.gw.logs.lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line['msg'] === 'connections refused at accept');

describe('open connections per address (limits.perAddress.connections, default 128)', () => {
  it('holds 128 connections of one address; the 129th and every later one is closed at accept, counted and logged once, while a second address is served', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    // Every other budget out of the way; `connections` is left at its default.
    const gw = await start({ clock, overrides: { limits: { perAddress: { requestsPerSecond: 10_000, inFlight: 10_000, connectionsPerSecond: 10_000 } } } });
    const answers = await holdConnections(gw, INSIDER, DEFAULT_CONNECTIONS);
    expect(await count(gw, 'gateway_connections_open', {})).toBe(DEFAULT_CONNECTIONS);

    // Just outside: the next TLS connection never gets its handshake.
    expect(await admitted(gw, INSIDER)).toBeUndefined();
    // A flood of raw TCP connections from the same address: each closed at accept, none kept.
    const flood = 100;
    const sockets = await mapBounded(Array.from({ length: flood }), 20, () => openTcp(pool, gw.httpsPort, INSIDER).catch(() => undefined));
    for (const socket of sockets) if (socket) expect((await closedWithin(socket, performance.now(), HANG_GUARD_MS)).ms).toBeDefined();
    expect(await count(gw, 'gateway_address_budget_refusals_total', { reason: 'open_connections' })).toBe(1 + flood);
    expect(await count(gw, 'gateway_connections_open', {})).toBe(DEFAULT_CONNECTIONS);

    // Another address is served meanwhile.
    const other = await call(`${gw.httpsUrl}${JWKS_PATH}`, { ca, localAddress: SECOND_INSIDER });
    expect(other.status).toBe(200);

    // Never silent, never a flood: one line for all of them within the minute, naming the setting.
    expect(acceptLines(gw)).toEqual([
      expect.objectContaining({ level: 'warn', reason: 'open_connections', refused: 1, setting: 'limits.perAddress.connections' }),
    ]);
    // A minute later the next refusal is logged with the count of those since the last line.
    clock.advance(ACCEPT_REFUSAL_LOG_INTERVAL_MS);
    expect(await admitted(gw, INSIDER)).toBeUndefined();
    expect(acceptLines(gw).map((line) => line['refused'])).toEqual([1, flood + 1]);

    // One connection closes: its place is free again, for that address only.
    held.shift()?.();
    expect((await answers[0])?.status).toBe(200);
    await waitFor(
      'the answered connection to be closed on the gateway',
      async () => (await count(gw, 'gateway_connections_open', {})) === DEFAULT_CONNECTIONS - 1,
    );
    expect(await admitted(gw, INSIDER)).toBeDefined();
    expect(await admitted(gw, INSIDER)).toBeUndefined();
  });

  it('does not budget the connections of a trusted proxy: its clients are budgeted by the address it reports', async () => {
    const gw = await start({ overrides: { trustedProxies: [`${INSIDER}/32`], limits: { perAddress: { connections: 2 } } } });
    for (let i = 0; i < 3; i += 1) expect(await admitted(gw, INSIDER), `proxy connection ${i + 1}`).toBeDefined();
    // The same cap on a direct peer: the third is refused.
    expect(await admitted(gw, SECOND_INSIDER)).toBeDefined();
    expect(await admitted(gw, SECOND_INSIDER)).toBeDefined();
    expect(await admitted(gw, SECOND_INSIDER)).toBeUndefined();
  });
});

describe('a client that opens a connection per request (connectionsPerSecond defaults to requestsPerSecond, 200)', () => {
  it('is served for 200 requests in a second, each on a new TLS connection; the 201st connection of that second is closed at accept', async () => {
    // The per-address budgets at their defaults: 200 requests and 200 new connections a second.
    const gw = await start({ overrides: { limits: { perAddress: {} } } });
    const answers = await mapBounded(Array.from({ length: 200 }), 4, () => call(`${gw.httpsUrl}${JWKS_PATH}`, { ca, localAddress: INSIDER }));
    expect(answers.map((answer) => answer.status)).toEqual(Array(200).fill(200));
    expect(await admitted(gw, INSIDER)).toBeUndefined();
    expect(await count(gw, 'gateway_address_budget_refusals_total', { reason: 'connections_per_second' })).toBe(1);
  });
});

describe('the first-request deadline (edge.firstRequestTimeoutMs)', () => {
  /** Deadlines the gateway set, fired by the test. */
  function manualTimer() {
    const timers: { ms: number; fire: () => void; cancelled: boolean }[] = [];
    const timer: DeadlineTimer = (ms, fire) => {
      const entry = { ms, fire, cancelled: false };
      timers.push(entry);
      return () => {
        entry.cancelled = true;
      };
    };
    return { timers, timer };
  }

  it('answers 408 and closes a connection that sent nothing when its deadline passes; a connection whose first request came is left alone', async () => {
    const { timers, timer } = manualTimer();
    const gw = await start({ overrides: { edge: { firstRequestTimeoutMs: 2500 } }, firstRequestTimer: timer });

    const idle = await openTls(pool, gw.httpsPort, INSIDER, ca);
    await waitFor('the idle connection to be tracked', () => timers.length === 1);
    expect(timers[0]!.ms).toBe(2500);

    const busy = await openTls(pool, gw.httpsPort, SECOND_INSIDER, ca);
    await waitFor('the second connection to be tracked', () => timers.length === 2);
    const firstAnswer = new Promise<string>((resolve) => busy.once('data', (chunk: Buffer) => resolve(chunk.toString('latin1'))));
    busy.write(`GET ${JWKS_PATH} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
    expect(await firstAnswer).toMatch(/^HTTP\/1\.1 200 /);
    expect(timers[1]!.cancelled).toBe(true);
    expect(timers[0]!.cancelled).toBe(false);

    const before = await count(gw, 'gateway_client_errors_total', { kind: 'first_request_timeout' });
    const closing = closedWithin(idle, performance.now(), HANG_GUARD_MS);
    timers[0]!.fire();
    const { ms, received } = await closing;
    expect(ms, 'the idle connection closed').toBeDefined();
    expect(received.toString('latin1')).toMatch(/^HTTP\/1\.1 408 [\s\S]*connection: close\r\n\r\n\{.*"code":"request_timeout"/);
    expect(await count(gw, 'gateway_client_errors_total', { kind: 'first_request_timeout' })).toBe(before + 1);

    // A deadline that fires after the first request changes nothing: the connection still serves.
    timers[1]!.fire();
    const secondAnswer = new Promise<string>((resolve) => busy.once('data', (chunk: Buffer) => resolve(chunk.toString('latin1'))));
    busy.write(`GET ${JWKS_PATH} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
    expect(await secondAnswer).toMatch(/^HTTP\/1\.1 200 /);
    expect(await count(gw, 'gateway_client_errors_total', { kind: 'first_request_timeout' })).toBe(before + 1);
  });

  it('closes, with the real timer, a TLS connection that sends nothing after its handshake (not the 10 s headers deadline: the count says which)', async () => {
    const gw = await start({ overrides: { edge: { firstRequestTimeoutMs: 300 } } });
    const socket = await openTls(pool, gw.httpsPort, INSIDER, ca);
    // Hang guard: far above the 300 ms deadline; the headers deadline (10 s) would count as request_timeout.
    const { ms } = await closedWithin(socket, performance.now(), 30_000);
    expect(ms, 'the idle connection closed').toBeDefined();
    expect(await count(gw, 'gateway_client_errors_total', { kind: 'first_request_timeout' })).toBe(1);
    expect(await count(gw, 'gateway_client_errors_total', { kind: 'request_timeout' })).toBe(0);
  });

  it('closes a raw TCP connection that never starts its TLS handshake by the first-request deadline, which bounds the handshake deadline', async () => {
    const gw = await start({ overrides: { edge: { firstRequestTimeoutMs: 300, handshakeTimeoutMs: 10_000 } } });
    const socket = await openTcp(pool, gw.httpsPort, INSIDER);
    // Hang guard: far above the 300 ms deadline and below the 10 s handshake deadline it replaces.
    const { ms } = await closedWithin(socket, performance.now(), 8_000);
    expect(ms, 'the raw connection closed before the 10 s handshake deadline').toBeDefined();
    expect(await count(gw, 'gateway_client_errors_total', { kind: 'tls' })).toBe(1);
  });
});

describe('the budgets and the refusal log, on their own', () => {
  const limits: PerAddressLimits = { requestsPerSecond: 100, inFlight: 100, connectionsPerSecond: 100, connections: 2 };

  it('counts open connections per address, an IPv6 client per /64, and frees a place when one closes (once)', () => {
    const budgets = new AddressBudgets(() => limits, new ManualClock());
    const a = budgets.admitConnection('2001:db8:1:2::1');
    const b = budgets.admitConnection('2001:db8:1:2:ffff::9');
    expect(a.refused).toBeUndefined();
    expect(b.refused).toBeUndefined();
    expect(budgets.admitConnection('2001:db8:1:2::77').refused).toBe('open_connections');
    // Another /64 has its own budget.
    expect(budgets.admitConnection('2001:db8:1:3::1').refused).toBeUndefined();
    if (a.refused === undefined) {
      a.closed();
      a.closed();
    }
    expect(budgets.admitConnection('2001:db8:1:2::5').refused).toBeUndefined();
    expect(budgets.admitConnection('2001:db8:1:2::6').refused).toBe('open_connections');
  });

  it('keeps an address with open connections past its second, and forgets it once they are closed', () => {
    const clock = new ManualClock();
    const budgets = new AddressBudgets(() => limits, clock);
    const admission = budgets.admitConnection('10.0.0.1');
    clock.advance(5000);
    budgets.admitConnection('10.0.0.2'); // sweeps
    expect(budgets.admitConnection('10.0.0.1').refused).toBeUndefined();
    expect(budgets.admitConnection('10.0.0.1').refused).toBe('open_connections');
    if (admission.refused === undefined) admission.closed();
    expect(budgets.admitConnection('10.0.0.1').refused).toBeUndefined();
  });

  it('logs the first refusal of a reason at once and then at most one line a minute, with the count since the last', () => {
    const clock = new ManualClock();
    const lines: Record<string, unknown>[] = [];
    const log = new AcceptRefusalLog({ warn: (fields) => lines.push(fields) }, clock);
    for (let i = 0; i < 500; i += 1) log.refused('open_connections');
    log.refused('connection_cap');
    expect(lines.map((line) => [line['reason'], line['refused']])).toEqual([
      ['open_connections', 1],
      ['connection_cap', 1],
    ]);
    clock.advance(ACCEPT_REFUSAL_LOG_INTERVAL_MS - 1);
    log.refused('open_connections');
    expect(lines).toHaveLength(2);
    clock.advance(1);
    log.refused('open_connections');
    expect(lines.at(-1)).toEqual(expect.objectContaining({ reason: 'open_connections', refused: 501, setting: 'limits.perAddress.connections' }));
  });
});
