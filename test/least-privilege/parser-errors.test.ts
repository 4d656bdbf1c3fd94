import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenGateway, type RunningGateway } from '../../src/server.js';
import { createTestGateway, testCertificatePem, type TestGateway } from '../support/gateway-fixture.js';
import { parseHttpAnswer, rawExchange } from '../transport/real-clients.js';
import { expectContractError } from './contract-helpers.js';

/**
 * Issue 9 row 11 (D34), raw bytes over a real TLS socket: requests Node's HTTP parser rejects
 * (CL+TE, duplicate Content-Length, a 20 KB header, HTTP/1.1 without Host) get the envelope with
 * its code, X-Correlation-Id equal to the body's correlationId, a JSON content type and
 * Connection: close, and the server closes the connection. HTTP/1.0 without Host is fine.
 */

const LOGIN = '/api/v1/auth/login';
const JWKS = '/.well-known/jwks.json';

describe('the envelope for requests the HTTP parser rejects (D34)', () => {
  let gw: TestGateway;
  let running: RunningGateway;
  let ca: string;

  beforeAll(async () => {
    ca = await testCertificatePem();
    gw = await createTestGateway();
    running = await listenGateway(gw.gateway, { https: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 } });
  });
  afterAll(async () => {
    await running?.close();
    await gw?.close();
  });

  async function expectParserEnvelope(bytes: string, status: number, code: string, message: string): Promise<void> {
    const { received, closedByServer } = await rawExchange(running.httpsUrl, bytes, { tls: { ca } });
    const answer = parseHttpAnswer(received);
    const context = `${answer.rawHead}\n\n${answer.body}`;
    expect(answer.statusCode, context).toBe(status);
    expect(answer.headers['connection'], context).toBe('close');
    expect(answer.headers['content-type'], context).toBe('application/json; charset=utf-8');
    const envelope = expectContractError(answer, status, code, message);
    expect(answer.headers['x-correlation-id']).toBe(envelope.correlationId);
    expect(answer.body).not.toMatch(/Client Error|"error":|statusCode/);
    expect(closedByServer, 'the server closes the connection').toBe(true);
  }

  it('answers Content-Length with Transfer-Encoding (CL+TE) with 400 malformed_request', async () => {
    await expectParserEnvelope(
      `POST ${LOGIN} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
      400,
      'malformed_request',
      'Malformed HTTP request',
    );
  });

  it('answers a duplicate Content-Length with 400 malformed_request', async () => {
    await expectParserEnvelope(
      `POST ${LOGIN} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 7\r\n\r\n{}`,
      400,
      'malformed_request',
      'Malformed HTTP request',
    );
  });

  it('answers a 20 KB header with 431 headers_too_large', async () => {
    await expectParserEnvelope(
      `GET ${JWKS} HTTP/1.1\r\nHost: localhost\r\nX-Padding: ${'a'.repeat(20 * 1024)}\r\n\r\n`,
      431,
      'headers_too_large',
      'Request headers are too large',
    );
  });

  it('answers HTTP/1.1 without Host with 400 "Host header is required"; HTTP/1.0 without Host is served', async () => {
    await expectParserEnvelope(`GET ${JWKS} HTTP/1.1\r\nAccept: application/json\r\n\r\n`, 400, 'malformed_request', 'Host header is required');

    const { received } = await rawExchange(running.httpsUrl, `GET ${JWKS} HTTP/1.0\r\nAccept: application/json\r\n\r\n`, { tls: { ca } });
    const answer = parseHttpAnswer(received);
    expect(answer.statusCode, answer.rawHead).toBe(200);
    expect(JSON.parse(answer.body)).toMatchObject({ keys: [expect.objectContaining({ kid: 'sbx-1' })] });
  });
});
