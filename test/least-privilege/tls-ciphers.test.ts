import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, getCiphers, type ConnectionOptions } from 'node:tls';
import selfsigned from 'selfsigned';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenGateway, type RunningGateway } from '../../src/server.js';
import { createTestGateway, testKeys, type TestGateway } from '../support/gateway-fixture.js';
import { parseHttpAnswer, rawExchange } from '../transport/real-clients.js';

/**
 * Issue 9 row 9 (D33), on a real TLS listener, once with an EC P-256 certificate (the ECDSA
 * suites) and once with an RSA one (the RSA suites, and the only certificate with which static
 * RSA and DHE key exchange could be agreed at all): TLS 1.2 agrees only to ECDHE key exchange
 * with AEAD ciphers; CBC suites (SHA-1 or SHA-2 MAC), static RSA and DHE suites fail the
 * handshake with the server's alert; TLS 1.3 works as Node provides it.
 */

type Handshake = { ok: true; protocol: string | null; cipher: string } | { ok: false; error: string };

interface Certificate {
  name: string;
  files(): Promise<{ cert: string; key: string }>;
  /** ECDHE + AEAD suites for this key type: the only TLS 1.2 suites the gateway may agree to. */
  aead: string[];
  /** Suites the certificate could carry, which the listener must refuse. */
  refused: string[];
}

async function rsaCertificate(): Promise<{ cert: string; key: string }> {
  const pems = await selfsigned.generate([{ name: 'commonName', value: 'localhost' }], {
    keySize: 2048,
    algorithm: 'sha256',
    extensions: [{ name: 'subjectAltName', altNames: [{ type: 2, value: 'localhost' }] }],
  });
  const dir = mkdtempSync(join(tmpdir(), 'gw-rsa-'));
  const cert = join(dir, 'tls.crt');
  const key = join(dir, 'tls.key');
  writeFileSync(cert, pems.cert, { mode: 0o600 });
  writeFileSync(key, pems.private, { mode: 0o600 });
  return { cert, key };
}

const CERTIFICATES: Certificate[] = [
  {
    name: 'EC P-256',
    files: async () => {
      const keys = await testKeys();
      return { cert: keys.tlsCert, key: keys.tlsKey };
    },
    aead: ['ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-ECDSA-AES256-GCM-SHA384', 'ECDHE-ECDSA-CHACHA20-POLY1305'],
    refused: ['ECDHE-ECDSA-AES128-SHA', 'ECDHE-ECDSA-AES256-SHA', 'ECDHE-ECDSA-AES128-SHA256', 'ECDHE-ECDSA-AES256-SHA384'],
  },
  {
    name: 'RSA 2048',
    files: rsaCertificate,
    aead: ['ECDHE-RSA-AES128-GCM-SHA256', 'ECDHE-RSA-AES256-GCM-SHA384', 'ECDHE-RSA-CHACHA20-POLY1305'],
    refused: [
      'ECDHE-RSA-AES128-SHA',
      'ECDHE-RSA-AES256-SHA',
      'ECDHE-RSA-AES128-SHA256',
      'ECDHE-RSA-AES256-SHA384',
      // static RSA key exchange, CBC and AEAD
      'AES128-SHA',
      'AES256-SHA256',
      'AES128-GCM-SHA256',
      'AES256-GCM-SHA384',
      // finite-field DHE
      'DHE-RSA-AES128-GCM-SHA256',
      'DHE-RSA-AES256-SHA',
    ],
  },
];

describe.each(CERTIFICATES)('TLS suites on the real listener with an $name certificate (D33)', (certificate) => {
  let gw: TestGateway;
  let running: RunningGateway;
  let ca: string;
  let port: number;

  beforeAll(async () => {
    const files = await certificate.files();
    ca = readFileSync(files.cert, 'utf8');
    gw = await createTestGateway({ overrides: { tls: { cert: { file: files.cert }, key: { file: files.key } } } });
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
      socket.on('error', (error: NodeJS.ErrnoException) => resolve({ ok: false, error: `${error.code ?? ''} ${error.message}` }));
    });
  }

  const tls12 = (cipher: string) => handshake({ minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2', ciphers: cipher });

  it('fails the TLS 1.2 handshake, with the server alert, for CBC, static RSA and DHE suites the client offers', async () => {
    const outcomes: string[] = [];
    for (const cipher of certificate.refused) {
      const result = await tls12(cipher);
      // A suite the client cannot even offer proves nothing: the refusal must be the server's.
      outcomes.push(`${cipher}: ${result.ok ? `agreed ${result.cipher}` : /alert|handshake failure/i.test(result.error) ? 'refused' : result.error}`);
    }
    expect(outcomes).toEqual(certificate.refused.map((cipher) => `${cipher}: refused`));
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
    expect([...new Set(accepted)].sort()).toEqual([...certificate.aead].sort());

    for (const cipher of certificate.aead) {
      const result = await tls12(cipher);
      expect(result, cipher).toMatchObject({ ok: true, protocol: 'TLSv1.2', cipher });
    }
    const tls13 = await handshake({ minVersion: 'TLSv1.3' });
    expect(tls13).toMatchObject({ ok: true, protocol: 'TLSv1.3' });

    // An AEAD connection carries a real request.
    const { received } = await rawExchange(running.httpsUrl, 'GET /.well-known/jwks.json HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n', {
      tls: { ca, servername: 'localhost', maxVersion: 'TLSv1.2', ciphers: certificate.aead[2] },
    });
    expect(parseHttpAnswer(received).statusCode).toBe(200);
  });
});
