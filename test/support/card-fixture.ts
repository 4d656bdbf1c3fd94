import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import { canonicalRequestId } from '../../src/cards/card-idempotency.js';
import type { CardResponse } from '../../src/cards/card-schemas.js';
import { connectorIdempotencyKey } from '../../src/connector/connector-contract.js';
import type { ManualClock } from '../../src/foundation/clock.js';
import { startSandboxConnector, type RunningSandboxConnector, type SandboxMode, type SandboxStats } from '../../src/connector/sandbox/sandbox-connector.js';
import type { GatewayStore } from '../../src/store/store-types.js';
import { cardRequestBody } from '../../tools/card-request-body.js';
import { RELAXED_LIMITS } from './auth-requests.js';
import { expectEnvelopeBasics } from './envelope.js';
import { createTestGateway, login, type RawConfig, type TestCredential, type TestGateway } from './gateway-fixture.js';
import { waitFor } from './wait.js';

/**
 * Card-creation tests (spec 4.4, D13-D19): a real sandbox connector listening on a free port,
 * a real gateway forwarding to it, and small helpers to create cards and read the connector's
 * own view of what reached it.
 */

export const CARDS = '/api/v1/issuing/cards';

/** The card record of spec 2.2 as the gateway answers it. */
export type CardAnswer = CardResponse;

export interface ErrorAnswer {
  correlationId: string;
  status: number;
  message: string;
  details: { fields?: { path: string; message: string }[] };
  timestamp: string;
  retryAfter?: number;
}

/** A minimal valid body for `acct-eu` (`full`, `create-only`): a fresh requestId each call. */
export function validCardBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { requestId: randomUUID(), cardLimit: 10_000, currency: 'EUR', ...overrides };
}

/** A body that uses every optional member of spec 2.3 within the D14 bounds (the benchmark's body, at `validCardBody`'s limit). */
export function fullCardBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...cardRequestBody(randomUUID(), 10_000), ...overrides };
}

/** POST /api/v1/issuing/cards as a JSON client; `query` like `revealDetails=true`. */
export function createCard(
  gw: TestGateway,
  token: string | undefined,
  body: unknown,
  query?: string,
  headers: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  return gw.inject({
    method: 'POST',
    url: query ? `${CARDS}?${query}` : CARDS,
    headers: {
      'content-type': 'application/json',
      ...(token !== undefined && { authorization: `Bearer ${token}` }),
      ...headers,
    },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** Asserts 201 and returns the card. */
export function expectCard(response: LightMyRequestResponse): CardAnswer {
  expect(response.statusCode, response.body).toBe(201);
  return response.json<CardAnswer>();
}

/** Asserts the D20 envelope with this status and message, and returns it. */
export function expectError(response: LightMyRequestResponse, status: number, message: string): ErrorAnswer {
  return expectEnvelopeBasics(response, status, message);
}

/** 400 "Request validation failed" whose `details.fields` name `path` with `message` (exact or pattern). */
export function expectFieldError(response: LightMyRequestResponse, path: string, message?: string | RegExp): ErrorAnswer {
  const body = expectError(response, 400, 'Request validation failed');
  const fields = body.details.fields ?? [];
  const hit = fields.find(
    (field) => field.path === path && (message === undefined || (typeof message === 'string' ? field.message === message : message.test(field.message))),
  );
  expect(hit, `expected a problem at ${path}${message ? ` (${String(message)})` : ''}, got ${JSON.stringify(fields)}`).toBeDefined();
  return body;
}

/**
 * Waits until the idempotency record of the card made for `body` is in `store`, read through the
 * store's own connection. A card is answered before its record is written (the write follows on
 * that connection, and this read behind it), and until the write settles a duplicate in the same
 * process is answered from memory: a test that breaks the store and expects a replay to meet the
 * broken store waits here first.
 */
export async function cardRecordStored(store: GatewayStore, body: Record<string, unknown>, now: number, issuingAccount = 'acct-eu'): Promise<void> {
  const recordKey = connectorIdempotencyKey(issuingAccount, canonicalRequestId(String(body['requestId'])));
  await waitFor(`the card record ${recordKey} to be in the store`, async () => (await store.idempotency.peek(recordKey, now)).state === 'completed');
}

/** The sandbox connector's own counters and the last request it saw. */
export async function connectorStats(connector: RunningSandboxConnector): Promise<SandboxStats> {
  const response = await fetch(`${connector.url}/__control/stats`);
  expect(response.status).toBe(200);
  return (await response.json()) as SandboxStats;
}

export async function setConnectorMode(
  connector: RunningSandboxConnector,
  mode: { mode: SandboxMode; delayMs?: number; status?: number; count?: number },
): Promise<void> {
  const response = await fetch(`${connector.url}/__control/mode`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(mode),
  });
  expect(response.status, await response.text()).toBe(200);
}

/** Forgets every card and counter of the connector (and returns it to normal mode). */
export async function resetConnector(connector: RunningSandboxConnector): Promise<void> {
  const response = await fetch(`${connector.url}/__control/reset`, { method: 'POST' });
  expect(response.status).toBe(200);
}

export interface CardFixture {
  gw: TestGateway;
  connector: RunningSandboxConnector;
  /** An access token for `username` obtained through the real login route. */
  token(username?: string): Promise<string>;
  close(): Promise<void>;
}

export interface CardFixtureOptions {
  store?: GatewayStore;
  clock?: ManualClock;
  /**
   * Connector timeout of the gateway config; default {@link FIXTURE_CONNECTOR_TIMEOUT_MS}. A test
   * about the deadline sets its own and makes the connector hold its answer.
   */
  connectorTimeoutMs?: number;
  /** Reuse a running connector (replicas); it is then not closed by `close()`. */
  connector?: RunningSandboxConnector;
  /** Point the gateway at this URL instead of the connector (a dead port). */
  connectorUrl?: string;
  overrides?: RawConfig;
  /** The gateway's credentials; default DEFAULT_CREDENTIALS. */
  credentials?: TestCredential[];
}

/**
 * Generous: a machine busy with other suites makes a card request slower, never a 504 that the
 * test does not check.
 */
export const FIXTURE_CONNECTOR_TIMEOUT_MS = 30_000;

/** Starts a sandbox connector (unless given one) and a gateway that forwards to it. */
export async function startCardFixture(options: CardFixtureOptions = {}): Promise<CardFixture> {
  const ownConnector = options.connector === undefined;
  const connector = options.connector ?? (await startSandboxConnector({ host: '127.0.0.1', port: 0, controls: true }));
  try {
    const gw = await createTestGateway({
      ...(options.store && { store: options.store }),
      ...(options.clock && { clock: options.clock }),
      ...(options.credentials && { credentials: options.credentials }),
      overrides: {
        rateLimits: RELAXED_LIMITS,
        connector: { url: options.connectorUrl ?? connector.url, timeoutMs: options.connectorTimeoutMs ?? FIXTURE_CONNECTOR_TIMEOUT_MS },
        ...options.overrides,
      },
    });
    return {
      gw,
      connector,
      token: async (username = 'full') => (await login(gw, username)).accessToken,
      close: async () => {
        try {
          await gw.close();
        } finally {
          if (ownConnector) await connector.close();
        }
      },
    };
  } catch (error) {
    if (ownConnector) await connector.close();
    throw error;
  }
}

/** An access token minted directly (no store involved), for when login itself cannot work. */
export async function mintToken(gw: TestGateway, username: string): Promise<string> {
  const credential = gw.config.credentials.byUsername(username);
  if (!credential) throw new Error(`no credential ${username}`);
  return (await gw.gateway.tokens.issueAccessToken(credential)).token;
}
