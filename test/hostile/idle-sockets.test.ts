import type { Socket } from 'node:net';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RELAXED_LIMITS } from '../support/auth-requests.js';
import { rawTestConfig, testCertificatePem, writeTestConfig } from '../support/gateway-fixture.js';
import { freePort } from '../support/ports.js';
import { builtEntryPoints, spawnEntry, type BuiltEntryPoints, type RunningProcess } from '../support/process.js';
import {
  adminGet,
  call,
  closedWithin,
  INSIDER,
  INSIDERS_ONLY,
  JWKS_PATH,
  limitOpenFiles,
  listenTestGateway,
  LOGIN_PATH,
  metricSum,
  openTcp,
  openTls,
  OUTSIDER,
  sleep,
  SocketPool,
  waitUntilHealthy,
  type ListeningGateway,
} from './support.js';
import { PASSWORD } from '../support/gateway-fixture.js';
import { HANG_GUARD_MS, waitFor } from '../support/wait.js';

/**
 * Issue 8, attack 5 (D25): idle raw TCP, idle TLS and trickled headers from an address outside
 * the allowlist (127.0.0.3) are closed by the configured deadlines, outsiders are capped in
 * number so that they cannot lock allowlisted clients out, and idle keep-alive connections
 * close after edge.keepAliveTimeoutMs. Old code: held 120 s / 57 s / 87 s, no cap (700 idle
 * sockets exhausted a gateway with 600 file descriptors), keep-alive 72 s.
 */

const DEADLINE_MS = 1000;
/**
 * How long a test waits for the gateway to close a socket: a hang guard, 30 times the configured
 * deadline, and still well short of what holds a socket when the deadline is not applied (Node's
 * own 60 s headers and 120 s handshake timeouts; the old code's 57-120 s). Its expiry fails the test.
 */
const CLOSE_GUARD_MS = 30_000;
/** The keep-alive test's own, longer, so that "still open just inside it" survives a busy machine. */
const KEEP_ALIVE_MS = 3000;
const OUTSIDER_CAP = 20;

const EDGE = {
  handshakeTimeoutMs: DEADLINE_MS,
  headersTimeoutMs: DEADLINE_MS,
  keepAliveTimeoutMs: DEADLINE_MS,
  maxOutsiderConnections: OUTSIDER_CAP,
};

/**
 * Waits until the gateway has closed the outsiders over its cap (it does so at accept, a busy
 * machine only delays it), then checks that it holds exactly the cap: fewer would mean a timer,
 * not the cap, closed them. Returns how many it holds.
 */
async function outsidersAtCap(pool: SocketPool): Promise<number> {
  await waitFor(
    () => `the gateway to close the outsiders over its cap of ${OUTSIDER_CAP} (${pool.open} open)`,
    () => pool.open <= OUTSIDER_CAP,
  );
  expect(pool.open, 'outsider connections the gateway keeps open').toBe(OUTSIDER_CAP);
  return pool.open;
}

/** Reads one HTTP/1.1 response (with Content-Length) from `socket`; the socket stays open. */
function readResponse(socket: Socket, timeoutMs = HANG_GUARD_MS): Promise<{ status: number; head: string; body: string }> {
  return new Promise((resolve, reject) => {
    let buffer = Buffer.alloc(0);
    const cleanup = () => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('close', onClose);
    };
    const onClose = () => {
      cleanup();
      reject(new Error(`connection closed before a whole response arrived: ${buffer.toString('latin1').slice(0, 200)}`));
    };
    const onData = (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      const end = buffer.indexOf('\r\n\r\n');
      if (end === -1) return;
      const head = buffer.subarray(0, end).toString('latin1');
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? '0');
      if (buffer.length < end + 4 + length) return;
      cleanup();
      resolve({ status: Number(head.split(' ')[1]), head, body: buffer.subarray(end + 4, end + 4 + length).toString('utf8') });
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`no whole response within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on('data', onData);
    socket.once('close', onClose);
  });
}

const GET_JWKS = `GET ${JWKS_PATH} HTTP/1.1\r\nHost: localhost\r\n\r\n`;

describe('idle and trickling sockets (D25)', () => {
  let ca: string;
  const pool = new SocketPool();
  let listening: ListeningGateway | undefined;

  beforeAll(async () => {
    ca = await testCertificatePem();
  });
  afterEach(async () => {
    pool.destroyAll();
    await listening?.close();
    listening = undefined;
  });

  async function start(edge: Record<string, number> = EDGE): Promise<ListeningGateway> {
    listening = await listenTestGateway({ overrides: { allowlist: INSIDERS_ONLY, edge, rateLimits: RELAXED_LIMITS } });
    return listening;
  }

  it('closes an idle raw TCP connection (no byte sent) from an outsider by the handshake deadline', async () => {
    const { httpsPort } = await start();
    const socket = await openTcp(pool, httpsPort, OUTSIDER);
    const { ms } = await closedWithin(socket, performance.now(), CLOSE_GUARD_MS);
    expect(ms, `idle TCP still open ${CLOSE_GUARD_MS} ms after connecting`).toBeDefined();
  });

  it('closes an idle TLS connection (handshake done, no request) from an outsider by the headers deadline', async () => {
    const { httpsPort } = await start();
    const socket = await openTls(pool, httpsPort, OUTSIDER, ca);
    const { ms, received } = await closedWithin(socket, performance.now(), CLOSE_GUARD_MS);
    expect(ms, `idle TLS still open ${CLOSE_GUARD_MS} ms after the handshake`).toBeDefined();
    // Where an answer is written at all, it is a refusal or a timeout, never a served request.
    if (received.length > 0) expect(received.toString('latin1')).toMatch(/^HTTP\/1\.1 (403|408) /);
  });

  it('closes a connection that trickles its headers one byte every 200 ms by the headers deadline', async () => {
    const { httpsPort } = await start();
    const socket = await openTls(pool, httpsPort, OUTSIDER, ca);
    const since = performance.now();
    socket.write(`GET ${JWKS_PATH} HTTP/1.1\r\nHost: localhost\r\nX-Trickle: `);
    const trickle = setInterval(() => {
      if (!socket.destroyed && socket.writable) socket.write('a');
    }, 200);
    try {
      const { ms, received } = await closedWithin(socket, since, CLOSE_GUARD_MS);
      expect(ms, `trickling connection still open ${CLOSE_GUARD_MS} ms after its first byte`).toBeDefined();
      if (received.length > 0) expect(received.toString('latin1')).toMatch(/^HTTP\/1\.1 (403|408) /);
    } finally {
      clearInterval(trickle);
    }
  });

  it('closes an idle keep-alive connection of an allowlisted client after keepAliveTimeoutMs, not before', async () => {
    const { httpsPort, gw } = await start({ ...EDGE, keepAliveTimeoutMs: KEEP_ALIVE_MS });
    // The configured time is the one the listener applies. Without it Node's own default (5 s)
    // would close the socket well inside the guard below too, so the close alone cannot tell.
    expect(gw.gateway.app.server.keepAliveTimeout, 'keep-alive time of the TLS listener').toBe(KEEP_ALIVE_MS);
    const socket = await openTls(pool, httpsPort, INSIDER, ca);
    socket.write(GET_JWKS);
    expect((await readResponse(socket)).status).toBe(200);
    // Just inside: a sixth of the keep-alive time later the connection still serves.
    await sleep(KEEP_ALIVE_MS / 6);
    socket.write(GET_JWKS);
    const second = await readResponse(socket);
    expect(second.status).toBe(200);
    // Then idle: closed by the gateway after the keep-alive time (old code: 72 s, past the guard).
    const { ms } = await closedWithin(socket, performance.now(), CLOSE_GUARD_MS);
    expect(ms, `idle keep-alive connection still open ${CLOSE_GUARD_MS} ms after its last answer`).toBeDefined();
  });

  it(`holds at most ${OUTSIDER_CAP} outsider connections and still serves an allowlisted client at once`, async () => {
    // Long handshake deadline: what closes the outsiders here is the cap, not a timer.
    const { httpsPort, httpsUrl, adminUrl } = await start({ ...EDGE, handshakeTimeoutMs: 10_000, headersTimeoutMs: 10_000 });
    const outsiders = await Promise.allSettled(Array.from({ length: 100 }, () => openTcp(pool, httpsPort, OUTSIDER)));
    expect(outsiders.filter((outcome) => outcome.status === 'fulfilled').length).toBeGreaterThan(0);
    const holding = await outsidersAtCap(pool);

    // An allowlisted client logs in while the outsiders hold their share: they are all still
    // open when its connection is ready (it did not wait for them to go).
    let openAtHandshake: number | undefined;
    const login = await call(`${httpsUrl}${LOGIN_PATH}`, {
      ca,
      localAddress: INSIDER,
      body: JSON.stringify({ username: 'full', password: PASSWORD }),
      timeoutMs: 60_000,
      onConnected: () => (openAtHandshake = pool.open),
    });
    expect(login.status, login.body).toBe(200);
    expect(openAtHandshake, 'outsider connections still open when the login connection was ready').toBe(holding);

    const metrics = (await adminGet(adminUrl, '/metrics')).body;
    expect(metricSum(metrics, 'gateway_connections_refused_total', { reason: 'outsider_cap' })).toBeGreaterThanOrEqual(100 - OUTSIDER_CAP);
  });
});

describe('outsider sockets cannot exhaust the file descriptors of the real process (D25)', () => {
  let entry: BuiltEntryPoints;
  let ca: string;
  let gateway: RunningProcess | undefined;
  const pool = new SocketPool();

  beforeAll(async () => {
    ca = await testCertificatePem();
    entry = await builtEntryPoints();
  }, 120_000);
  afterEach(async () => {
    pool.destroyAll();
    await gateway?.kill();
    gateway = undefined;
  });

  it('serves an allowlisted login while 200 idle outsider sockets hit a gateway with 64 spare file descriptors', async () => {
    const ports = { https: await freePort(), admin: await freePort() };
    const written = await writeTestConfig(
      await rawTestConfig({
        listeners: { https: { host: INSIDER, port: ports.https }, admin: { host: INSIDER, port: ports.admin } },
        trustedProxies: [],
        allowlist: INSIDERS_ONLY,
        edge: { maxOutsiderConnections: OUTSIDER_CAP },
      }),
    );
    gateway = spawnEntry(entry.mainJs, written.file);
    const adminUrl = `http://${INSIDER}:${ports.admin}`;
    await waitUntilHealthy(adminUrl, gateway);
    // Like a gateway with 600 descriptors facing 700 sockets, scaled down: 64 to spare, 200 sockets.
    limitOpenFiles(gateway.child.pid!, 64);

    // 200 idle connections from the outsider, 50 at a time (bounded), all kept open by us.
    for (let batch = 0; batch < 4; batch += 1) {
      await Promise.allSettled(Array.from({ length: 50 }, () => openTcp(pool, ports.https, OUTSIDER)));
    }
    const holding = await outsidersAtCap(pool);
    let openAtHandshake: number | undefined;
    const login = await call(`https://${INSIDER}:${ports.https}${LOGIN_PATH}`, {
      ca,
      localAddress: INSIDER,
      body: JSON.stringify({ username: 'full', password: PASSWORD }),
      timeoutMs: 60_000,
      onConnected: () => (openAtHandshake = pool.open),
    }).catch(
      (error: NodeJS.ErrnoException) => new Error(`allowlisted login failed: ${error.code ?? ''} ${error.message}; stderr: ${gateway?.stderr().slice(-500)}`),
    );
    if (login instanceof Error) throw login;
    expect(login.status, login.body).toBe(200);
    // The gateway took the connection and did its handshake while every outsider it holds still
    // held its socket: it did not wait for a descriptor to come free. (Observed at the handshake,
    // not at the answer: on a heavily oversubscribed machine the answer has come after the
    // outsiders' own 10 s handshake deadline closed some of them, which says nothing about
    // descriptors.)
    expect(openAtHandshake, 'outsider sockets still open when the login connection was ready').toBe(holding);
    expect((await adminGet(adminUrl, '/healthz')).status).toBe(200);
  });
});
