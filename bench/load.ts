/**
 * The Node load generator, in its own process (pinned apart from the server under test):
 *   node dist/bench/load.js '<json options>'
 * Drives one load over an undici pool for `durationSeconds` and prints one JSON line with the
 * request rate and latency percentiles in microseconds. Without `overallRate` each connection
 * sends its next request when the last one answered (throughput: wrk's job when it is there,
 * this generator's only as the fallback, whose figures are not comparable); with it, requests
 * are sent on a fixed schedule and latency is measured from the scheduled instant, so a stall
 * of the server shows as latency rather than as fewer requests (no coordinated omission), which
 * wrk cannot do. The auth mix (login then refresh) is this generator's alone.
 */
import { Pool } from 'undici';
import { requestMaker, type RequestTemplate } from './request-templates.js';

export interface LoadOptions {
  /** https://127.0.0.1:port (or http for the connector). */
  origin: string;
  /** What to send (bench/request-templates.ts); absent for the auth mix. */
  template?: RequestTemplate;
  /** Login then refresh, logins rotating over `${usernamePrefix}0` .. `${usernamePrefix}${usernameCount - 1}`. */
  authMix?: { usernamePrefix: string; usernameCount: number; password: string };
  connections: number;
  durationSeconds: number;
  /** Fixed overall request rate (req/s); absent = as fast as the server answers. */
  overallRate?: number;
  /** PEM of the CA the gateway's certificate comes from. */
  ca?: string;
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

const pool = new Pool(options.origin, { connections: options.connections, pipelining: 1, connect: { ...(options.ca && { ca: options.ca }) } });
const latencies: number[] = [];
let non2xx = 0;
let errors = 0;

async function send(method: 'GET' | 'POST', requestPath: string, headers: Record<string, string>, body?: string): Promise<{ status: number; text: string }> {
  const response = await pool.request({ method, path: requestPath, headers, body });
  const text = await response.body.text();
  return { status: response.statusCode, text };
}

const nextRequest = options.template && requestMaker(options.template);

/** One unit of the load: a request (or, for the auth mix, a login and its refresh). */
let login = Math.floor(Math.random() * (options.authMix?.usernameCount ?? 1));
async function unit(): Promise<number> {
  if (nextRequest) {
    const request = nextRequest();
    return (await send(request.method, request.path, request.headers, request.body)).status;
  }
  const mix = options.authMix!;
  // Start at a random offset so that consecutive runs in one minute use other names.
  login = (login + 1) % mix.usernameCount;
  // Many clients behind the trusted load balancer (127.0.0.1): each login comes from its
  // own address, as D27's per-address login limit (30/min) expects of real traffic.
  const from = `10.${(login >> 8) & 255}.${login & 255}.1`;
  const loginAnswer = await send(
    'POST',
    '/api/v1/auth/login',
    { 'content-type': 'application/json', 'x-forwarded-for': from },
    JSON.stringify({ username: `${mix.usernamePrefix}${login}`, password: mix.password }),
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
