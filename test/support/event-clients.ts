import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CONNECTOR_EVENTS_PATH, CONNECTOR_SECRET_HEADER } from '../../src/connector/connector-events-contract.js';
import type { GatewayEvent } from '../../src/foundation/event-types.js';
import { call, type HttpAnswer } from '../hostile/support.js';
import { PASSWORD, type TestCredential } from './config-fixture.js';
import { TEST_WEBHOOK_SECRET } from './signed-deliveries.js';
import { HANG_GUARD_MS, waitFor } from './wait.js';

/**
 * The two clients of the events over real sockets: the connector posting to the connector
 * listener (D64), and a partner reading events back through the API (D66). Plus the files the
 * config of such a gateway names.
 */

export const EVENTS_PATH = '/api/v1/issuing/events';
export const CONNECTOR_EVENTS_SECRET = 'connector-events-secret-for-tests-0123456789';

/** A credential that may read acct-eu's events and nothing else. */
export const EVENTS_READER: TestCredential = {
  id: 'cred-events',
  username: 'events',
  password: PASSWORD,
  issuingAccount: 'acct-eu',
  permissions: ['events:read'],
};

/** The connector's secret and the webhook secret in private files, as a config names them. */
export function writeEventSecrets(): { connectorSecretFile: string; webhookSecretFile: string } {
  const dir = mkdtempSync(join(tmpdir(), 'gw-event-secrets-'));
  const connectorSecretFile = join(dir, 'connector-events.secret');
  const webhookSecretFile = join(dir, 'webhook.secret');
  writeFileSync(connectorSecretFile, CONNECTOR_EVENTS_SECRET, { mode: 0o600 });
  writeFileSync(webhookSecretFile, TEST_WEBHOOK_SECRET, { mode: 0o600 });
  return { connectorSecretFile, webhookSecretFile };
}

/** One POST of the connector to the connector listener over TLS, with its secret. */
export function postConnectorEvent(connectorUrl: string, ca: string, body: Record<string, unknown>, timeoutMs = HANG_GUARD_MS): Promise<HttpAnswer> {
  return call(`${connectorUrl}${CONNECTOR_EVENTS_PATH}`, {
    ca,
    body: JSON.stringify(body),
    headers: { [CONNECTOR_SECRET_HEADER]: CONNECTOR_EVENTS_SECRET },
    timeoutMs,
  });
}

/** What the listener answered a recorded event (202) or its repeat (200). */
export interface RecordedAnswer {
  id: string;
  sequence: number;
}

/** Every event of the reader's account, newest first, read page by page (100 a page) through the API. */
export async function readAllEvents(httpsUrl: string, ca: string, token: string, query = ''): Promise<GatewayEvent[]> {
  const events: GatewayEvent[] = [];
  let cursor: string | null = null;
  // A hang guard on the pages, not a limit the tests reach: they record a few hundred events.
  for (let page = 0; page < 100; page += 1) {
    const params = new URLSearchParams(query);
    params.set('limit', '100');
    if (cursor !== null) params.set('cursor', cursor);
    const answer = await call(`${httpsUrl}${EVENTS_PATH}?${params.toString()}`, {
      ca,
      headers: { authorization: `Bearer ${token}` },
      timeoutMs: HANG_GUARD_MS,
    });
    if (answer.status !== 200) throw new Error(`GET ${EVENTS_PATH}: ${answer.status} ${answer.body}`);
    const body = JSON.parse(answer.body) as { data: GatewayEvent[]; nextCursor: string | null };
    events.push(...body.data);
    cursor = body.nextCursor;
    if (cursor === null) return events;
  }
  throw new Error(`GET ${EVENTS_PATH}: more than 100 pages`);
}

/**
 * Until the gateway's `/readyz` says its store answers: a gateway process connects to Redis in
 * the background after it listens, and refuses what needs the store (503) until then.
 */
export async function waitForStore(adminUrl: string): Promise<void> {
  await waitFor(
    `the store of the gateway at ${adminUrl}`,
    async () => (JSON.parse((await call(`${adminUrl}/readyz`, { timeoutMs: HANG_GUARD_MS })).body) as { checks?: { store?: string } }).checks?.store === 'ok',
    { intervalMs: 100 },
  );
}
