import { connect, getCiphers, type ConnectionOptions } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenGateway, type RunningGateway } from '../../src/server.js';
import { createTestGateway, testCertificatePem, type TestGateway } from '../support/gateway-fixture.js';
import { parseHttpAnswer, rawExchange } from '../transport/real-clients.js';

/**
 * Issue 9 row 9 (D33), on a real TLS listener with the test certificate (EC P-256, so the ECDSA
 * suites): TLS 1.2 offers only ECDHE key exchange with AEAD ciphers; CBC suites (SHA-1 or SHA-2
 * MAC) and non-ECDHE suites fail the handshake; TLS 1.3 works as Node provides it.
 */

/** ECDHE + AEAD suites for an ECDSA certificate: the only TLS 1.2 suites the gateway may agree to. */
const AEAD_ECDSA = ['ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-ECDSA-AES256-GCM-SHA384', 'ECDHE-ECDSA-CHACHA20-POLY1305'];
const REFUSED = [
  'ECDHE-ECDSA-AES128-SHA',
  'ECDHE-ECDSA-AES256-SHA',
  'ECDHE-ECDSA-AES128-SHA256',
  'ECDHE-ECDSA-AES256-SHA384',
  // not ECDHE
  'AES128-SHA',
  'AES128-GCM-SHA256',
  'AES256-GCM-SHA384',
];

type Handshake = { ok: true; protocol: string | null; cipher: string } | { ok: false; error: string };

describe('TLS suites on the real listener (D33)', () => {
  let gw: TestGateway;
  let running: RunningGateway;
  let ca: string;
  let port: number;

  beforeAll(async () => {
    ca = await testCertificatePem();
    gw = await createTestGateway();
    running = await listenGateway(gw.gateway, { https: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 } });
    port = Number(new URL(running.httpsUrl).port);
  });
  afterAll(async () => {
    await running?.close();
    await gw?.close();
  });

  function handshake(options: Partial<ConnectionOptions>): Promise<Handshake> {
    return new Promise((resolve) => {
      let socket: ReturnType<typeof connect>;
      try {
        socket = connect({ host: '127.0.0.1', port, ca, servername: 'localhost', ...options }, () => {
          resolve({ ok: true, protocol: socket.getProtocol(), cipher: socket.getCipher().name });
          socket.end();
        });
      } catch (error) {
        // The client's own OpenSSL cannot offer this suite at all.
        resolve({ ok: false, error: `client: ${(error as Error).message}` });
        return;
      }
      socket.setTimeout(5000, () => {
        socket.destroy();
        resolve({ ok: false, error: 'timeout' });
      });
      socket.on('error', (error: NodeJS.ErrnoException) => resolve({ ok: false, error: error.code ?? error.message }));
    });
  }

  const tls12 = (cipher: string) => handshake({ minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2', ciphers: cipher });

  it('fails TLS 1.2 handshakes that offer only CBC (SHA-1 or SHA-2 MAC) or non-ECDHE suites', async () => {
    const agreed: string[] = [];
    for (const cipher of REFUSED) {
      const result = await tls12(cipher);
      if (result.ok) agreed.push(`${cipher} -> ${result.cipher}`);
    }
    expect(agreed, 'the listener agreed to these suites').toEqual([]);
  });

  it('agrees in TLS 1.2 to exactly the ECDHE AEAD suites of every suite the client can offer, and speaks TLS 1.3', async () => {
    // sslscan-like: offer each TLS 1.2 suite on its own and record which ones the listener takes.
    const accepted: string[] = [];
    for (const cipher of getCiphers()
      .filter((name) => !name.startsWith('tls_'))
      .map((name) => name.toUpperCase())) {
      const result = await tls12(cipher);
      if (result.ok) accepted.push(result.cipher);
    }
    expect([...new Set(accepted)].sort()).toEqual([...AEAD_ECDSA].sort());

    for (const cipher of AEAD_ECDSA) {
      const result = await tls12(cipher);
      expect(result, cipher).toMatchObject({ ok: true, protocol: 'TLSv1.2', cipher });
    }
    const tls13 = await handshake({ minVersion: 'TLSv1.3' });
    expect(tls13).toMatchObject({ ok: true, protocol: 'TLSv1.3' });

    // An AEAD connection carries a real request.
    const { received } = await rawExchange(running.httpsUrl, 'GET /.well-known/jwks.json HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n', {
      tls: { ca, maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-CHACHA20-POLY1305' },
    });
    expect(parseHttpAnswer(received).statusCode).toBe(200);
  });
});
