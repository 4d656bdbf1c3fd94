import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandboxConnector, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { connectorCertificates } from '../support/connector-certificates.js';
import { createCard, expectCard, expectError, mintToken, validCardBody } from '../support/card-fixture.js';
import { createTestGateway, type TestGateway } from '../support/gateway-fixture.js';

/**
 * The connector trusts the gateway through mutual TLS (connector contract): the gateway
 * verifies the connector against `connector.tls.ca` and presents `connector.tls.cert`/`key`.
 */
describe('forward to a connector that requires mutual TLS', () => {
  let connector: RunningSandboxConnector;
  let files: { ca: string; cert: string; key: string; otherCa: string };
  const gateways: TestGateway[] = [];

  beforeAll(async () => {
    const pems = await connectorCertificates();
    const dir = mkdtempSync(join(tmpdir(), 'gw-mtls-'));
    const write = (name: string, content: string) => {
      writeFileSync(join(dir, name), content);
      return join(dir, name);
    };
    files = {
      ca: write('ca.crt', pems.ca),
      cert: write('client.crt', pems.client.cert),
      key: write('client.key', pems.client.key),
      otherCa: write('other-ca.crt', pems.otherCa),
    };
    connector = await startSandboxConnector({ controls: true, tls: { ...pems.server, ca: pems.ca } });
  });

  afterAll(async () => {
    await Promise.all(gateways.map((gw) => gw.close()));
    await connector.close();
  });

  async function gatewayWith(tls: Record<string, unknown>): Promise<TestGateway> {
    const gw = await createTestGateway({ overrides: { connector: { url: connector.url, timeoutMs: 30_000, tls } } });
    gateways.push(gw);
    return gw;
  }

  it('creates a card when the gateway presents its client certificate and trusts the connector CA', async () => {
    expect(connector.url.startsWith('https://')).toBe(true);
    const gw = await gatewayWith({ ca: { file: files.ca }, cert: { file: files.cert }, key: { file: files.key } });
    const card = expectCard(await createCard(gw, await mintToken(gw, 'full'), validCardBody()));
    expect(card.pan).toMatch(/^\*{12}\d{4}$/);
  });

  it('answers 502 when the gateway has no client certificate: the connector refuses the handshake', async () => {
    const gw = await gatewayWith({ ca: { file: files.ca } });
    expectError(await createCard(gw, await mintToken(gw, 'full'), validCardBody()), 502, 'Card processor error');
  });

  it("regression: reply-from's rejectUnauthorized=false default never applies; a connector certificate from another CA gets 502", async () => {
    const gw = await gatewayWith({ ca: { file: files.otherCa }, cert: { file: files.cert }, key: { file: files.key } });
    const response = await createCard(gw, await mintToken(gw, 'full'), validCardBody());
    expectError(response, 502, 'Card processor error');
    expect(response.body).not.toContain('certificate');
  });

  it('refuses connector.tls with a plain http:// connector URL at start-up', async () => {
    await expect(createTestGateway({ overrides: { connector: { url: 'http://127.0.0.1:9', tls: { ca: { file: files.ca } } } } })).rejects.toThrow(
      /connector\.tls: needs an https:\/\/ connector\.url/,
    );
  });
});
