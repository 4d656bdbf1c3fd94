/**
 * The load generator, in its own process (pinned apart from the server under test):
 *   node dist/bench/load.js '<json options>'
 * Runs autocannon once and prints one JSON line with the figures the orchestrator keeps.
 */
import { randomUUID } from 'node:crypto';
import autocannon from 'autocannon';

export interface LoadOptions {
  url: string;
  scenario: 'connector-create' | 'gateway-create' | 'gateway-replay' | 'auth-mix';
  connections: number;
  durationSeconds: number;
  /** Fixed overall request rate (req/s); absent = as fast as the server answers. */
  overallRate?: number;
  token?: string;
  /** auth-mix: logins rotate over `${usernamePrefix}0` .. `${usernamePrefix}${usernameCount - 1}`. */
  usernamePrefix?: string;
  usernameCount?: number;
  password?: string;
}

const options = JSON.parse(process.argv[2] ?? '{}') as LoadOptions;

// About the size of the perf-notes payload (≈430 bytes) with realistic spending controls.
const publicBody = (requestId: string) =>
  JSON.stringify({
    requestId,
    cardLimit: 125000,
    currency: 'EUR',
    config: {
      expiryDuration: 12,
      authorizationWindow: { startDate: '2026-12-01T00:00:00Z', endDate: '2026-12-31T23:59:59Z' },
      tolerance: { percentage: 5 },
      cardType: 'VIRTUAL_TRAVEL',
      maxTransactions: 3,
      allowedCategories: ['airline', 'hotel'],
    },
    metadata: { card_name: 'Trip to Lisbon', file_ref: 'PNR-7XK2Q9', cost_center: 'CC-4410', airline_code: 'TP' },
  });

const connectorBody = (requestId: string) =>
  JSON.stringify({
    requestId,
    issuingAccount: 'acct-bench-eu',
    requestedCardLimit: 125000,
    cardLimit: 131250,
    currency: 'EUR',
    config: { expiryDuration: 12, tolerance: { percentage: 5 }, cardType: 'VIRTUAL_TRAVEL', maxTransactions: 3, allowedCategories: ['airline', 'hotel'] },
    metadata: { card_name: 'Trip to Lisbon', file_ref: 'PNR-7XK2Q9', cost_center: 'CC-4410', airline_code: 'TP' },
  });

type Request = autocannon.Request;
let login = Math.floor(Math.random() * (options.usernameCount ?? 1));
type SessionContext = Record<string, string | undefined>;

function requests(): Request[] {
  switch (options.scenario) {
    case 'connector-create':
      return [
        {
          method: 'POST',
          setupRequest: (request) => {
            const requestId = randomUUID();
            return { ...request, headers: { 'content-type': 'application/json', 'idempotency-key': `acct-bench-eu:${requestId}`, 'x-correlation-id': requestId }, body: connectorBody(requestId) };
          },
        },
      ];
    case 'gateway-create':
      return [
        {
          method: 'POST',
          setupRequest: (request) => ({ ...request, headers: { 'content-type': 'application/json', authorization: `Bearer ${options.token}` }, body: publicBody(randomUUID()) }),
        },
      ];
    case 'gateway-replay': {
      const body = publicBody('00000000-0000-4000-8000-00000000beef');
      return [{ method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${options.token}` }, body }];
    }
    case 'auth-mix':
      return [
        {
          method: 'POST',
          path: '/api/v1/auth/login',
          setupRequest: (request) => {
            // Start at a random offset so that consecutive runs in one minute use other names.
            login = (login + 1) % (options.usernameCount ?? 1);
            return { ...request, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: `${options.usernamePrefix ?? ''}${login}`, password: options.password }) };
          },
          onResponse: (_status, body, untyped) => {
            const context = untyped as SessionContext;
            try {
              const tokens = JSON.parse(body) as { accessToken: string; refreshToken: string };
              context['accessToken'] = tokens.accessToken;
              context['refreshToken'] = tokens.refreshToken;
            } catch {
              context['accessToken'] = undefined;
            }
          },
        },
        {
          method: 'POST',
          path: '/api/v1/auth/refresh',
          setupRequest: (request, untyped) => {
            const context = untyped as SessionContext;
            return {
            ...request,
            headers: { 'content-type': 'application/json', authorization: `Bearer ${String(context['accessToken'])}` },
            body: JSON.stringify({ refreshToken: context['refreshToken'] }),
            };
          },
        },
      ];
  }
}

const result = await autocannon({
  url: options.url,
  connections: options.connections,
  duration: options.durationSeconds,
  ...(options.overallRate && { overallRate: options.overallRate }),
  requests: requests(),
});

process.stdout.write(
  `${JSON.stringify({
    rps: result.requests.average,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    p999Ms: result.latency.p99_9,
    requests: result.requests.total,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
  })}\n`,
);
