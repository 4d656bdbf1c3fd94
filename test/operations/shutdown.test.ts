import { copyFileSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSandboxConnector, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { setConnectorMode } from '../support/card-fixture.js';
import { rawTestConfig, testCertificatePem, writeTestConfig } from '../support/gateway-fixture.js';
import {
  builtEntryPoints,
  call,
  cardBody,
  connectOutcome,
  killAll,
  loginOver,
  postCard,
  REPO,
  startGateway,
  startProcess,
  type BuiltEntryPoints,
  type LogLine,
} from './support.js';

/**
 * D38 on the real process: at SIGTERM `/readyz` answers 503 (`draining`) at once while the API
 * keeps serving for `shutdown.delaySeconds`; then new connections are refused, in-flight
 * requests finish, and the process exits 0. And `npm start` passes SIGTERM on to the gateway.
 */

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const scratch: string[] = [];

let entry: BuiltEntryPoints;
let ca: string;
beforeAll(async () => {
  [entry, ca] = await Promise.all([builtEntryPoints(), testCertificatePem()]);
}, 180_000);
afterEach(async () => {
  await killAll();
});
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

/** When a log line was written (its ISO `time`), in epoch milliseconds. */
const loggedAt = (line: LogLine): number => Date.parse(String(line['time']));
/** Milliseconds between two log lines. */
const between = (from: LogLine, to: LogLine): number => loggedAt(to) - loggedAt(from);

describe('SIGTERM behind a load balancer (D38)', () => {
  let connector: RunningSandboxConnector;
  beforeAll(async () => {
    connector = await startSandboxConnector({ host: '127.0.0.1', port: 0, controls: true });
  });
  afterAll(async () => {
    await connector?.close();
  });

  it('readiness 503 at once, the API serving for the delay, then no new connections, the in-flight request answered, exit 0', async () => {
    const written = await writeTestConfig(
      await rawTestConfig({
        trustedProxies: [],
        connector: { url: connector.url, timeoutMs: 5000 },
        shutdown: { delaySeconds: 2, drainTimeoutSeconds: 10 },
      }),
    );
    scratch.push(written.dir);
    const gateway = await startGateway(written.file);
    const token = await loginOver(gateway.httpsUrl, ca);
    const jwks = () => call(`${gateway.httpsUrl}/.well-known/jwks.json`, { ca, timeoutMs: 3000 });
    const readyz = async () => {
      const answer = await call(`${gateway.adminUrl}/readyz`, { timeoutMs: 3000 });
      return { status: answer.status, body: JSON.parse(answer.body) as { status: string } };
    };
    expect((await readyz()).status).toBe(200);

    const sentAt = Date.now();
    gateway.child.kill('SIGTERM');
    const shuttingDown = await gateway.waitForLog((line) => typeof line['msg'] === 'string' && line['msg'].startsWith('shutting down'), { timeoutMs: 5000 });
    expect(shuttingDown).toMatchObject({ signal: 'SIGTERM', delaySeconds: 2, drainTimeoutSeconds: 10, msg: 'shutting down: /readyz answers 503' });

    // At once: not ready, while the process still serves.
    const notReady = await readyz();
    expect(notReady.status).toBe(503);
    expect(notReady.body.status).toBe('draining');
    expect(Date.now() - sentAt).toBeLessThan(1500);
    // The API still answers on new connections during the delay, and liveness stays 200.
    expect((await jwks()).status).toBe(200);
    expect((await call(`${gateway.adminUrl}/healthz`)).status).toBe(200);

    // A card request that is still in flight when the delay ends: the connector answers in 3 s.
    await setConnectorMode(connector, { mode: 'delay', delayMs: 3000, count: 1 });
    const inFlight = postCard(gateway.httpsUrl, ca, token, cardBody(), { timeoutMs: 10_000 });
    let answeredAt: number | undefined;
    void inFlight.then(
      () => (answeredAt = Date.now()),
      () => undefined,
    );
    expect(Date.now() - sentAt, 'the request went out within the delay').toBeLessThan(1800);

    const draining = await gateway.waitForLog((line) => line['msg'] === 'draining in-flight requests', { timeoutMs: 5000 });
    // Log times are whole milliseconds of Date.now(), and a Node timer may fire up to 1 ms early
    // by that clock: a 2 s delay reads 1 999 ms at the least.
    expect(between(shuttingDown, draining)).toBeGreaterThanOrEqual(1999);
    // Once draining: new connections are refused, while the card request is still waiting.
    let refused = 'connected';
    for (let attempt = 0; attempt < 40 && refused !== 'ECONNREFUSED'; attempt += 1) {
      refused = await connectOutcome(gateway.httpsUrl);
      if (refused !== 'ECONNREFUSED') await sleep(25);
    }
    expect(refused).toBe('ECONNREFUSED');
    expect(answeredAt, 'the in-flight request is still waiting for the connector').toBeUndefined();
    expect(gateway.hasExited()).toBe(false);

    const answer = await inFlight;
    expect(answer.status, answer.body).toBe(201);
    const exit = await gateway.exitWithin(5000);
    expect(exit).toEqual({ code: 0, signal: null });
    const stopped = await gateway.waitForLog((line) => line['msg'] === 'stopped');
    expect(loggedAt(stopped)).toBeGreaterThanOrEqual((answeredAt ?? Infinity) - 50);
    expect(await connectOutcome(gateway.adminUrl)).toBe('ECONNREFUSED');
  }, 30_000);

  it('a drain longer than shutdown.drainTimeoutSeconds ends the process anyway, exit 1', async () => {
    const written = await writeTestConfig(
      await rawTestConfig({ trustedProxies: [], connector: { url: connector.url, timeoutMs: 5000 }, shutdown: { delaySeconds: 0, drainTimeoutSeconds: 1 } }),
    );
    scratch.push(written.dir);
    const gateway = await startGateway(written.file);
    const token = await loginOver(gateway.httpsUrl, ca);
    await setConnectorMode(connector, { mode: 'delay', delayMs: 4000, count: 1 });
    const stuck = postCard(gateway.httpsUrl, ca, token, cardBody(), { timeoutMs: 8000 }).then(
      (answer) => `answered ${answer.status}`,
      (error: NodeJS.ErrnoException) => error.code ?? error.message,
    );
    // The request has reached the connector before the signal.
    await sleep(500);
    const sentAt = Date.now();
    gateway.child.kill('SIGTERM');
    const exit = await gateway.exitWithin(5000);
    const tookMs = Date.now() - sentAt;
    expect(exit).toEqual({ code: 1, signal: null });
    expect(tookMs).toBeGreaterThanOrEqual(900);
    expect(tookMs).toBeLessThan(3000);
    await gateway.waitForLog((line) => line['level'] === 'error' && line['msg'] === 'drain took longer than 1 s; exiting');
    // The client's connection went with the process: no answer, never a hang.
    expect(await stuck).not.toMatch(/^answered/);
  }, 30_000);

  it('a second signal during the delay exits at once, exit 1, and says so', async () => {
    const written = await writeTestConfig(await rawTestConfig({ trustedProxies: [], shutdown: { delaySeconds: 10 } }));
    scratch.push(written.dir);
    const gateway = await startGateway(written.file);
    gateway.child.kill('SIGTERM');
    await gateway.waitForLog((line) => line['msg'] === 'shutting down: /readyz answers 503');
    const sentAt = Date.now();
    gateway.child.kill('SIGINT');
    expect(await gateway.exitWithin(5000)).toEqual({ code: 1, signal: null });
    expect(Date.now() - sentAt).toBeLessThan(3000);
    await gateway.waitForLog((line) => line['level'] === 'warn' && line['msg'] === 'second signal: exiting without waiting' && line['signal'] === 'SIGINT');
  }, 30_000);
});

describe('npm start', () => {
  /**
   * The repository's package.json in a scratch folder whose `dist` is this run's build, so
   * `npm start --ignore-scripts` runs the real `start` script without the prestart build.
   */
  function npmFolder(): string {
    const dir = mkdtempSync(join(tmpdir(), 'ops-npm-start-'));
    scratch.push(dir);
    copyFileSync(join(REPO, 'package.json'), join(dir, 'package.json'));
    symlinkSync(entry.dir, join(dir, 'dist'), 'dir');
    return dir;
  }

  const alive = (pid: number): boolean => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };

  it('passes SIGTERM to the gateway: it drains and exits, and its ports are free', async () => {
    const written = await writeTestConfig(
      await rawTestConfig({
        trustedProxies: [],
        listeners: { https: { host: '127.0.0.1', port: 0 }, plainHttp: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 } },
      }),
    );
    scratch.push(written.dir);
    const npm = startProcess('npm', ['start', '--ignore-scripts', '--', '--config', written.file], { cwd: npmFolder() });
    const listening = await npm.waitForLog((line) => line['msg'] === 'gateway listening', { timeoutMs: 30_000 });
    const gatewayPid = Number(listening['pid']);
    expect(gatewayPid).not.toBe(npm.pid);
    const urls = [String(listening['https']), String(listening['plainHttp']), String(listening['admin'])];
    expect((await call(`${urls[0]}/.well-known/jwks.json`, { ca })).status).toBe(200);

    // SIGTERM to npm alone, as a supervisor that knows only npm's pid would send it.
    npm.child.kill('SIGTERM');
    await npm.waitForLog((line) => line['msg'] === 'shutting down: /readyz answers 503' && line['signal'] === 'SIGTERM', { timeoutMs: 5000 });
    await npm.waitForLog((line) => line['msg'] === 'stopped', { timeoutMs: 10_000 });
    await npm.exitWithin(10_000);
    for (let attempt = 0; attempt < 100 && alive(gatewayPid); attempt += 1) await sleep(20);
    expect(alive(gatewayPid), 'the gateway process is gone').toBe(false);
    for (const url of urls) expect(await connectOutcome(url), url).toBe('ECONNREFUSED');
  }, 40_000);
});
