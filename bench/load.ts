/**
 * The load generator, in its own process (pinned apart from the server under test):
 *   node dist/bench/load.js '<json options>'
 * Drives one scenario over an undici pool for `durationSeconds` and prints one JSON line with
 * the request rate and latency percentiles in microseconds. Without `overallRate` each
 * connection sends its next request when the last one answered (throughput); with it, requests
 * are sent on a fixed schedule and latency is measured from the scheduled instant, so a stall
 * of the server shows as latency rather than as fewer requests (no coordinated omission).
 */
import { randomUUID } from 'node:crypto';
import { Pool } from 'undici';
import { cardRequestBody } from '../tools/card-request-body.js';

export interface LoadOptions {
  url: string;
  scenario: 'connector-create' | 'gateway-create' | 'gateway-replay' | 'auth-mix' | 'connector-read' | 'gateway-read';
  connections: number;
  durationSeconds: number;
  /** Fixed overall request rate (req/s); absent = as fast as the server answers. */
  overallRate?: number;
  token?: string;
  /** PEM of the CA the gateway's certificate comes from. */
  ca?: string;
  /** auth-mix: logins rotate over `${usernamePrefix}0` .. `${usernamePrefix}${usernameCount - 1}`. */
  usernamePrefix?: string;
  usernameCount?: number;
  password?: string;
  /**
   * Card scenarios: the number of client addresses the requests take turns to come from, sent as
   * X-Forwarded-For by 127.0.0.1, which the bench gateways trust as their load balancer. One
   * address stands for one partner; the gateway's per-address budgets (D53) then hold each to
   * its share as they would in production. Absent: no header (the bare proxy and the connector).
   */
  clientAddresses?: number;
}

export interface LoadResult {
  rps: number;
  requests: number;
  p50Us: number;
  p99Us: number;
  p999Us: number;
  non2xx: number;
  errors: number;
}

const options = JSON.parse(process.argv[2] ?? '{}') as LoadOptions;
const target = new URL(options.url);

const CARD_LIMIT = 125000;
const publicBody = (requestId: string) => JSON.stringify(cardRequestBody(requestId, CARD_LIMIT));

/** What the gateway forwards for that body (its limit with D15's 5 % tolerance), sent straight to the connector. */
const connectorBody = (requestId: string) => {
  const { config, metadata } = cardRequestBody(requestId, CARD_LIMIT);
  return JSON.stringify({ requestId, issuingAccount: 'acct-bench-eu', requestedCardLimit: CARD_LIMIT, cardLimit: 131250, currency: 'EUR', config, metadata });
};

const pool = new Pool(target.origin, { connections: options.connections, pipelining: 1, connect: { ...(options.ca && { ca: options.ca }) } });
const path = `${target.pathname}${target.search}`;
const latencies: number[] = [];
let non2xx = 0;
let errors = 0;

async function send(method: 'GET' | 'POST', requestPath: string, headers: Record<string, string>, body?: string): Promise<{ status: number; text: string }> {
  const response = await pool.request({ method, path: requestPath, headers, body });
  const text = await response.body.text();
  return { status: response.statusCode, text };
}

/** The card load's client addresses, 10.100.0.0/16, one request each in turn. */
let clientIndex = 0;
const cardHeaders = (): Record<string, string> => {
  const headers: Record<string, string> = { 'content-type': 'application/json', authorization: `Bearer ${options.token}` };
  if (options.clientAddresses) {
    clientIndex = (clientIndex + 1) % options.clientAddresses;
    headers['x-forwarded-for'] = `10.100.${clientIndex >> 8}.${clientIndex & 255}`;
  }
  return headers;
};

/** One unit of the scenario: a request (or, for the auth mix, a login and its refresh). */
let login = Math.floor(Math.random() * (options.usernameCount ?? 1));
async function unit(): Promise<number> {
  switch (options.scenario) {
    case 'connector-create': {
      const requestId = randomUUID();
      return (
        await send(
          'POST',
          path,
          { 'content-type': 'application/json', 'idempotency-key': `acct-bench-eu:${requestId}`, 'x-correlation-id': requestId },
          connectorBody(requestId),
        )
      ).status;
    }
    case 'gateway-create':
      return (await send('POST', path, cardHeaders(), publicBody(randomUUID()))).status;
    case 'gateway-replay':
      return (await send('POST', path, cardHeaders(), publicBody('00000000-0000-4000-8000-00000000beef'))).status;
    // A GET of the url as given (one card, or a page of the list): straight to the connector
    // (through the bare proxy) with the account in the query, or through the gateway with the token.
    case 'connector-read':
      return (await send('GET', path, { 'x-correlation-id': randomUUID() })).status;
    case 'gateway-read': {
      const { 'content-type': _contentType, ...headers } = cardHeaders();
      return (await send('GET', path, headers)).status;
    }
    case 'auth-mix': {
      // Start at a random offset so that consecutive runs in one minute use other names.
      login = (login + 1) % (options.usernameCount ?? 1);
      // Many clients behind the trusted load balancer (127.0.0.1): each login comes from its
      // own address, as D27's per-address login limit (30/min) expects of real traffic.
      const from = `10.${(login >> 8) & 255}.${login & 255}.1`;
      const loginAnswer = await send(
        'POST',
        '/api/v1/auth/login',
        { 'content-type': 'application/json', 'x-forwarded-for': from },
        JSON.stringify({ username: `${options.usernamePrefix ?? ''}${login}`, password: options.password }),
      );
      if (loginAnswer.status !== 200) return loginAnswer.status;
      const tokens = JSON.parse(loginAnswer.text) as { accessToken: string; refreshToken: string };
      return (
        await send(
          'POST',
          '/api/v1/auth/refresh',
          { 'content-type': 'application/json', authorization: `Bearer ${tokens.accessToken}` },
          JSON.stringify({ refreshToken: tokens.refreshToken }),
        )
      ).status;
    }
  }
}

async function timed(startedAt: number): Promise<void> {
  try {
    const status = await unit();
    if (status < 200 || status >= 300) non2xx += 1;
  } catch {
    errors += 1;
  }
  latencies.push((performance.now() - startedAt) * 1000);
}

const started = performance.now();
const until = started + options.durationSeconds * 1000;
if (options.overallRate) {
  // Open loop: send on schedule, whatever the answers do.
  const interval = 1000 / options.overallRate;
  const inFlight: Promise<void>[] = [];
  let next = started;
  while (next < until) {
    const now = performance.now();
    while (next <= now && next < until) {
      inFlight.push(timed(next));
      next += interval;
    }
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, Math.min(5, next - performance.now()))));
  }
  await Promise.all(inFlight);
} else {
  await Promise.all(
    Array.from({ length: options.connections }, async () => {
      while (performance.now() < until) await timed(performance.now());
    }),
  );
}
const elapsed = (performance.now() - started) / 1000;
await pool.close();

latencies.sort((a, b) => a - b);
const percentile = (p: number) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? 0);
const result: LoadResult = {
  rps: Math.round(latencies.length / elapsed),
  requests: latencies.length,
  p50Us: percentile(50),
  p99Us: percentile(99),
  p999Us: percentile(99.9),
  non2xx,
  errors,
};
process.stdout.write(`${JSON.stringify(result)}\n`);
