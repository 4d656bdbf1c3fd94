import { connect } from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { listenGateway, type RunningGateway } from '../../src/server.js';
import { createTestGateway, testCertificatePem, type TestGateway } from '../support/gateway-fixture.js';

/** What happens on a kept-alive socket that is busy when close() begins (D20, D22). */
describe('requests on a busy keep-alive socket while the gateway drains', () => {
  let gw: TestGateway | undefined;
  let running: RunningGateway | undefined;
  afterEach(async () => {
    await running?.close();
    await gw?.close().catch(() => undefined);
  });

  it('regression: a keep-alive socket busy when close() begins is closed after its answer, so shutdown does not wait for the keep-alive timeout', async () => {
    let release: () => void = () => undefined;
    let started: () => void = () => undefined;
    const slowStarted = new Promise<void>((resolve) => (started = resolve));
    gw = await createTestGateway({
      overrides: { trustedProxies: [] },
      extend: {
        public: (app) =>
          app.get('/slow', async () => {
            started();
            await new Promise<void>((resolve) => (release = resolve));
            return { ok: true };
          }),
      },
    });
    running = await listenGateway(gw.gateway, { https: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 } });
    const socket = connect({ host: '127.0.0.1', port: Number(new URL(running.httpsUrl).port), ca: await testCertificatePem(), servername: 'localhost' });
    let received = '';
    const socketClosed = new Promise<void>((resolve) => {
      socket.on('data', (chunk: Buffer) => (received += chunk.toString('utf8')));
      socket.on('close', () => resolve());
      socket.on('error', () => resolve());
    });
    socket.write('GET /slow HTTP/1.1\r\nHost: localhost\r\n\r\n');
    await slowStarted;

    const closing = running.close();
    await new Promise((resolve) => setTimeout(resolve, 50));
    // The socket is busy, so close() did not reap it; this request arrives during the drain.
    socket.write('GET /.well-known/jwks.json HTTP/1.1\r\nHost: localhost\r\n\r\n');
    await new Promise((resolve) => setTimeout(resolve, 50));
    release();
    await Promise.all([closing, socketClosed]);

    const answers = received.split(/(?=HTTP\/1\.1 )/);
    // Only the in-flight request is answered, with Connection: close, so the socket (and with it
    // close()) ends at once instead of after the 72 s keep-alive timeout; the request sent on
    // the draining socket is never processed.
    expect(answers).toHaveLength(1);
    expect(answers[0]).toMatch(/^HTTP\/1\.1 200/);
    expect(answers[0]?.toLowerCase()).toContain('connection: close');
  });
});
