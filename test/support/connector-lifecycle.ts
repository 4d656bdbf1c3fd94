import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { createConnectorClient } from '../../src/connector/connector-client.js';
import type { ConnectorCard } from '../../src/connector/connector-contract.js';
import { ConnectorError, type ConnectorClient, type ConnectorFailureKind } from '../../src/connector/connector-port.js';
import type { ConnectorSettings } from '../../src/connector/connector-transport.js';
import { startSandboxConnector, type RunningSandboxConnector, type SandboxMode, type SandboxStats } from '../../src/connector/sandbox/sandbox-connector.js';
import { connectorCertificates } from './connector-certificates.js';

/**
 * The connector client against a real sandbox connector over real sockets: mutual TLS and the
 * shared secret, as a production gateway reaches its connector. The sandbox's controls are
 * driven through `inject`, so they need no certificate.
 */

export const SANDBOX_SECRET = 'lifecycle-test-secret';

export interface LifecycleSandbox {
  connector: RunningSandboxConnector;
  /** A client with the test's settings (short deadline, small cap...) over the same TLS. */
  client(overrides?: Partial<Pick<ConnectorSettings, 'timeoutMs' | 'maxAnswerBytes' | 'connections' | 'sharedSecret'>>): Promise<ConnectorClient>;
  /** Creates a card in `issuingAccount` through the sandbox's own creation route. */
  seed(issuingAccount: string, metadata?: Record<string, string>): Promise<ConnectorCard & { requestId: string }>;
  mode(mode: { mode: SandboxMode; delayMs?: number; status?: number; count?: number }): Promise<void>;
  stats(): Promise<SandboxStats>;
  close(): Promise<void>;
}

export async function startLifecycleSandbox(options: { now?: () => number } = {}): Promise<LifecycleSandbox> {
  const pems = await connectorCertificates();
  const connector = await startSandboxConnector({ controls: true, sharedSecret: SANDBOX_SECRET, tls: { ...pems.server, ca: pems.ca }, ...options });
  const clients: ConnectorClient[] = [];
  const control = async (method: 'GET' | 'POST', url: string, payload?: Record<string, unknown>) => {
    const response = await connector.app.inject({ method, url, ...(payload !== undefined && { payload }) });
    expect(response.statusCode, response.body).toBe(200);
    return response;
  };
  return {
    connector,
    async client(overrides = {}) {
      const settings: ConnectorSettings = {
        url: connector.url,
        timeoutMs: 5000,
        connections: 8,
        maxAnswerBytes: 1_048_576,
        startSandbox: false,
        tls: { ca: Buffer.from(pems.ca), cert: Buffer.from(pems.client.cert), key: Buffer.from(pems.client.key) },
        sharedSecret: SANDBOX_SECRET,
        ...overrides,
      };
      const client = createConnectorClient(settings);
      clients.push(client);
      return client;
    },
    async seed(issuingAccount, metadata = { team: 'qa' }) {
      const requestId = randomUUID();
      const response = await connector.app.inject({
        method: 'POST',
        url: '/v1/cards',
        headers: { 'idempotency-key': `${issuingAccount}:${requestId}`, 'x-gateway-secret': SANDBOX_SECRET },
        payload: { requestId, issuingAccount, requestedCardLimit: 1000, cardLimit: 1050, currency: 'EUR', metadata },
      });
      expect(response.statusCode, response.body).toBe(201);
      return { ...response.json<ConnectorCard>(), requestId };
    },
    async mode(mode) {
      await control('POST', '/__control/mode', mode);
    },
    async stats() {
      return (await control('GET', '/__control/stats')).json<SandboxStats>();
    },
    async close() {
      await Promise.all(clients.map((client) => client.close()));
      await connector.close();
    },
  };
}

/** Awaits `call` and expects it to reject with a ConnectorError of `kind`. */
export async function expectConnectorFailure(call: Promise<unknown>, kind: ConnectorFailureKind): Promise<ConnectorError> {
  const error: unknown = await call.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error, `expected a ConnectorError ${kind}`).toBeInstanceOf(ConnectorError);
  expect((error as ConnectorError).kind).toBe(kind);
  return error as ConnectorError;
}
