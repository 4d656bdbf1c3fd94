import { copyFileSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSandboxConnector, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { startHeldConnector } from '../support/held-connector.js';
import { parseLogLine } from '../support/process.js';
import { HANG_GUARD_MS, waitFor } from '../support/wait.js';
import { rawTestConfig, testCertificatePem, writeTestConfig } from '../support/gateway-fixture.js';
import {
  builtEntryPoints,
  call,
  cardBody,
  killAll,
  loginOver,
  postCard,
  REPO,
  startGateway,
  startProcess,
  type BuiltEntryPoints,
  type LogLine,
} from './support.js';
import { connectOutcome } from '../support/ports.js';

/**
 * D38 on the real process: at SIGTERM `/readyz` answers 503 (`draining`) at once while the API
 * keeps serving for `shutdown.delaySeconds`; then new connections are refused, in-flight
 * requests finish, and the process exits 0. And `npm start` passes SIGTERM on to the gateway.
 */

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

describe('SIGTERM behind a load balancer (D38)', () => {
  let connector: RunningSandboxConnector;
  beforeAll(async () => {
    connector = await startSandboxConnector({ host: '127.0.0.1', port: 0, controls: true });
  });
  afterAll(async () => {
    await connector?.close();
  });

  it('readiness 503 at once, the API serving for the delay, then no new connections, the in-flight request answered, exit 0', async () => {
    // The card request is held at the connector until the test releases it: "still in flight
    // when the drain starts" is a state, not a race between two delays.
    const held = await startHeldConnector(connector.url);
    try {
      const written = await writeTestConfig(
        await rawTestConfig({
          trustedProxies: [],
          connector: { url: held.url, timeoutMs: 60_000 },
          shutdown: { delaySeconds: 4, drainTimeoutSeconds: 120 },
        }),
      );
      scratch.push(written.dir);
      const gateway = await startGateway(written.file);
      const token = await loginOver(gateway.httpsUrl, ca);
      const jwks = () => call(`${gateway.httpsUrl}/.well-known/jwks.json`, { ca, timeoutMs: 30_000 });
      const readyz = async () => {
        const answer = await call(`${gateway.adminUrl}/readyz`, { timeoutMs: 30_000 });
        return { status: answer.status, body: JSON.parse(answer.body) as { status: string } };
      };
      const draining = (line: LogLine) => line['msg'] === 'draining in-flight requests';
      expect((await readyz()).status).toBe(200);

      gateway.child.kill('SIGTERM');
      const shuttingDown = await gateway.waitForLog((line) => typeof line['msg'] === 'string' && line['msg'].startsWith('shutting down'));
      expect(shuttingDown).toMatchObject({ signal: 'SIGTERM', delaySeconds: 4, drainTimeoutSeconds: 120, msg: 'shutting down: /readyz answers 503' });

      // Right after the signal, in this order of events: readiness says 503 while the API still
      // answers on new connections (after the delay they would be refused), liveness stays 200,
      // and a new card request is taken in.
      const inFlight = postCard(gateway.httpsUrl, ca, token, cardBody(), { timeoutMs: 120_000 });
      let answered = false;
      let exitedBeforeAnswer: boolean | undefined;
      void inFlight.then(
        () => {
          answered = true;
          exitedBeforeAnswer = gateway.hasExited();
        },
        () => undefined,
      );
      const [notReady, keys, health] = await Promise.all([readyz(), jwks(), call(`${gateway.adminUrl}/healthz`, { timeoutMs: 30_000 })]);
      expect(notReady.status).toBe(503);
      expect(notReady.body.status).toBe('draining');
      expect(keys.status).toBe(200);
      expect(health.status).toBe(200);
      await held.waitForHeld(1);

      await gateway.waitForLog(draining);
      // Once draining: new connections are refused, while the card request is still held.
      await waitFor('new connections to be refused while draining', async () => (await connectOutcome(gateway.httpsUrl)) === 'ECONNREFUSED');
      expect(answered, 'the in-flight request is still waiting for the connector').toBe(false);
      expect(gateway.hasExited()).toBe(false);

      held.release();
      const answer = await inFlight;
      expect(answer.status, answer.body).toBe(201);
      const exit = await gateway.exitWithin(60_000);
      expect(exit).toEqual({ code: 0, signal: null });
      // The process waited for the answer: it was still running when the client got it.
      expect(exitedBeforeAnswer).toBe(false);
      await gateway.waitForLog((line) => line['msg'] === 'stopped');
      expect(await connectOutcome(gateway.adminUrl)).toBe('ECONNREFUSED');
    } finally {
      await held.close();
    }
  });

  it('a drain longer than shutdown.drainTimeoutSeconds ends the process anyway, exit 1', async () => {
    const held = await startHeldConnector(connector.url);
    try {
      const written = await writeTestConfig(
        await rawTestConfig({ trustedProxies: [], connector: { url: held.url, timeoutMs: 60_000 }, shutdown: { delaySeconds: 0, drainTimeoutSeconds: 1 } }),
      );
      scratch.push(written.dir);
      const gateway = await startGateway(written.file);
      const token = await loginOver(gateway.httpsUrl, ca);
      const stuck = postCard(gateway.httpsUrl, ca, token, cardBody(), { timeoutMs: 120_000 }).then(
        (answer) => `answered ${answer.status}`,
        (error: NodeJS.ErrnoException) => error.code ?? error.message,
      );
      // The request is at the connector, held there for good, before the signal.
      await held.waitForHeld(1);
      gateway.child.kill('SIGTERM');
      // Never released: only the drain timeout can end the process (else the hang guard fails it).
      const exit = await gateway.exitWithin(60_000);
      expect(exit).toEqual({ code: 1, signal: null });
      await gateway.waitForLog((line) => line['level'] === 'error' && line['msg'] === 'drain took longer than 1 s; exiting');
      expect(
        gateway.lines.some((line) => parseLogLine(line)?.['msg'] === 'stopped'),
        'the drain never finished',
      ).toBe(false);
      // The client's connection went with the process: no answer, never a hang.
      expect(await stuck).not.toMatch(/^answered/);
    } finally {
      await held.close();
    }
  });

  it('a second signal during the delay exits at once, exit 1, and says so', async () => {
    const written = await writeTestConfig(await rawTestConfig({ trustedProxies: [], shutdown: { delaySeconds: 10 } }));
    scratch.push(written.dir);
    const gateway = await startGateway(written.file);
    gateway.child.kill('SIGTERM');
    await gateway.waitForLog((line) => line['msg'] === 'shutting down: /readyz answers 503');
    gateway.child.kill('SIGINT');
    expect(await gateway.exitWithin(60_000)).toEqual({ code: 1, signal: null });
    await gateway.waitForLog((line) => line['level'] === 'warn' && line['msg'] === 'second signal: exiting without waiting' && line['signal'] === 'SIGINT');
    // "At once": it never reached the end of the delay (a process that waited drains, logs it and exits 0).
    expect(gateway.lines.some((line) => parseLogLine(line)?.['msg'] === 'draining in-flight requests')).toBe(false);
  });
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
    await npm.waitForLog((line) => line['msg'] === 'shutting down: /readyz answers 503' && line['signal'] === 'SIGTERM', { timeoutMs: HANG_GUARD_MS });
    await npm.waitForLog((line) => line['msg'] === 'stopped', { timeoutMs: HANG_GUARD_MS });
    await npm.exitWithin(HANG_GUARD_MS);
    await waitFor('the gateway process to be gone', () => !alive(gatewayPid));
    for (const url of urls) expect(await connectOutcome(url), url).toBe('ECONNREFUSED');
  });
});
