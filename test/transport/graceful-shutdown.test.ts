import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Agent, request as httpsRequest } from 'node:https';
import type { Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { listenGateway, type RunningGateway } from '../../src/server.js';
import { createTestGateway, PASSWORD, rawTestConfig, testCertificatePem, writeTestConfig, type TestGateway } from '../support/gateway-fixture.js';
import { connectOutcome, freePort } from '../support/ports.js';
import { builtEntryPoints, spawnEntry, type BuiltEntryPoints, type RunningProcess } from '../support/process.js';
import { realRequest } from './real-clients.js';
import { waitFor } from '../support/wait.js';

/** D22: shutdown stops accepting, lets in-flight requests finish, then closes; SIGTERM does it. */

describe('graceful shutdown of the listeners', () => {
  let ca: string;
  let gw: TestGateway | undefined;
  let running: RunningGateway | undefined;
  let releaseSlow: () => void = () => undefined;

  beforeAll(async () => {
    ca = await testCertificatePem();
  });
  afterEach(async () => {
    releaseSlow();
    await running?.close();
    await gw?.close();
    running = undefined;
    gw = undefined;
  });

  /** A gateway with GET /slow, which answers only once the test calls `releaseSlow()`; `started` tells when it has begun. */
  async function startWithSlowRoute() {
    /** 'answered' once the server has sent the whole /slow answer (its onResponse hook). */
    const events: string[] = [];
    let markStarted: () => void = () => undefined;
    const started = new Promise<void>((resolve) => {
      markStarted = resolve;
    });
    gw = await createTestGateway({
      overrides: { trustedProxies: [] },
      extend: {
        public: (app) =>
          app.get('/slow', { onResponse: (_request, _reply, done) => (events.push('answered'), done()) }, async () => {
            markStarted();
            // Held, not timed: "still in flight" is a state the test ends, however busy the machine.
            await new Promise<void>((resolve) => {
              releaseSlow = resolve;
            });
            return { ok: true, payload: 'x'.repeat(64 * 1024) };
          }),
      },
    });
    running = await listenGateway(gw.gateway, {
      https: { host: '127.0.0.1', port: 0 },
      plainHttp: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
    });
    return { gw, running, started, events };
  }

  it('finishes an in-flight request, refuses new connections, then resolves', async () => {
    const { running: r, started, events } = await startWithSlowRoute();
    const inFlight = realRequest(`${r.httpsUrl}/slow`, { ca });
    await started;

    const closed = r.close().then(() => events.push('closed'));

    // While draining: once close() has stopped the listener (a few ticks after the call),
    // new connections are refused even though the slow request is still in flight.
    await waitFor('the TLS listener to stop accepting', () => (gw!.gateway.app.server.listening ? undefined : true));
    expect(events).toEqual([]);
    expect(await connectOutcome(r.httpsUrl)).toBe('ECONNREFUSED');
    expect(events, 'close() waits for the request in flight').toEqual([]);

    releaseSlow();
    const response = await inFlight;
    expect(response.status).toBe(200);
    expect(JSON.parse(response.body)).toEqual({ ok: true, payload: 'x'.repeat(64 * 1024) });
    await closed;
    expect(events).toEqual(['answered', 'closed']);

    expect(await connectOutcome(r.httpsUrl)).toBe('ECONNREFUSED');
    expect(await connectOutcome(r.plainUrl!)).toBe('ECONNREFUSED');
    expect(await connectOutcome(r.adminUrl)).toBe('ECONNREFUSED');
  });

  it('does not wait for idle keep-alive connections: the server closes them', async () => {
    const { running: r } = await startWithSlowRoute();
    // Idle kept-alive sockets would stay open for ten minutes by themselves: if close() waited
    // for them the test would hang (and fail at its hang guard) instead of measuring a time.
    gw!.gateway.app.server.keepAliveTimeout = 600_000;
    const agent = new Agent({ keepAlive: true, ca });
    try {
      const { status, socket } = await new Promise<{ status: number; socket: Socket }>((resolve, reject) => {
        const req = httpsRequest(`${r.httpsUrl}/.well-known/jwks.json`, { agent }, (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0, socket: req.socket! }));
        });
        req.on('error', reject);
        req.end();
      });
      expect(status).toBe(200);
      // The connection is idle in the agent's pool, open.
      expect(socket.destroyed).toBe(false);
      const closedByServer = new Promise<string>((resolve) => {
        socket.once('end', () => resolve('end from the server'));
        socket.once('close', () => resolve('closed'));
      });
      await r.close();
      // The server ended it; the client never did (the agent is destroyed only afterwards).
      expect(await closedByServer).toBe('end from the server');
    } finally {
      agent.destroy();
    }
  });
});

describe('SIGTERM to the real process', () => {
  let entry: BuiltEntryPoints;
  let gateway: RunningProcess | undefined;

  beforeAll(async () => {
    entry = await builtEntryPoints();
  }, 120_000);
  afterAll(() => {
    gateway?.kill();
  });

  it('drains, logs "stopped" and exits 0', async () => {
    const [https, plain, admin] = [await freePort(), await freePort(), await freePort()];
    const written = await writeTestConfig(
      await rawTestConfig({
        listeners: { https: { host: '127.0.0.1', port: https }, plainHttp: { host: '127.0.0.1', port: plain }, admin: { host: '127.0.0.1', port: admin } },
        trustedProxies: [],
      }),
    );
    gateway = spawnEntry(entry.mainJs, written.file);
    const listening = await gateway.waitForLog((line) => line['msg'] === 'gateway listening');
    expect(listening).toMatchObject({
      environment: 'sandbox',
      https: `https://127.0.0.1:${https}`,
      plainHttp: `http://127.0.0.1:${plain}`,
      admin: `http://127.0.0.1:${admin}`,
    });

    const ca = await testCertificatePem();
    const login = await realRequest(`https://127.0.0.1:${https}/api/v1/auth/login`, {
      ca,
      method: 'POST',
      body: JSON.stringify({ username: 'full', password: PASSWORD }),
    });
    expect(login.status).toBe(200);

    gateway.child.kill('SIGTERM');
    const { code, signal } = await gateway.exited;
    expect(signal).toBeNull();
    expect(code).toBe(0);
    const messages = gateway.lines.map((line) => (JSON.parse(line) as { msg?: string }).msg);
    expect(messages).toContain('draining in-flight requests');
    expect(messages.at(-1)).toBe('stopped');
    expect(await connectOutcome(`https://127.0.0.1:${https}`)).toBe('ECONNREFUSED');

    // The audit file lives in the temp folder, and the login reached it before exit.
    const auditFile = join(written.dir, 'audit.jsonl');
    expect(existsSync(auditFile)).toBe(true);
    expect(readFileSync(auditFile, 'utf8')).toContain('"event":"login.succeeded"');
  });
});
