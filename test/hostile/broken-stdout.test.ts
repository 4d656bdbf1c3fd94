import type { Readable } from 'node:stream';
import { Agent } from 'node:https';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { rawTestConfig, testCertificatePem, writeTestConfig } from '../support/gateway-fixture.js';
import { freePort } from '../support/ports.js';
import { builtEntryPoints, spawnEntry, type BuiltEntryPoints, type RunningProcess } from '../support/process.js';
import { adminGet, call, exitWithin, INSIDER, mapBounded, metricSum, sleep, waitUntilHealthy } from './support.js';
import { waitFor } from '../support/wait.js';

/**
 * Issue 8, attack 2 (D26): the gateway's stdout is piped into a reader that goes away after
 * 50 bytes (`node dist/src/main.js | head -c 50`, a log shipper that restarts or hangs). The
 * log sink must never stop the service: the gateway keeps serving and SIGTERM still ends it
 * within its drain time. Old code: with a reader that stopped reading, SIGTERM never ended it
 * (the exit-time flushSync retries EAGAIN forever).
 */

/** Requests that each log one line at debug (404s): enough to fill a 208 KiB socket buffer. */
const LOGGED_REQUESTS = 2000;

describe('stdout reader goes away (D26)', () => {
  let entry: BuiltEntryPoints;
  let ca: string;
  let gateway: RunningProcess | undefined;

  beforeAll(async () => {
    ca = await testCertificatePem();
    entry = await builtEntryPoints();
  }, 120_000);
  afterEach(async () => {
    await gateway?.kill();
    gateway = undefined;
  });

  /**
   * Starts the gateway with stdout piped to a reader that takes the first 50 bytes, then
   * either stops reading (keeps the pipe open: it fills up) or closes its end (EPIPE).
   */
  async function startWithHeadReader(reader: 'stops-reading' | 'closes'): Promise<{ gateway: RunningProcess; httpsUrl: string; adminUrl: string }> {
    const ports = { https: await freePort(), admin: await freePort() };
    const written = await writeTestConfig(
      await rawTestConfig({
        listeners: { https: { host: INSIDER, port: ports.https }, admin: { host: INSIDER, port: ports.admin } },
        trustedProxies: [],
        // At debug every request writes a line (at info, refusals are left to the audit trail).
        logging: { level: 'debug' },
      }),
    );
    let headBytes = 0;
    const started = spawnEntry(entry.mainJs, written.file, {
      onStdout: (stdout: Readable) => {
        const onData = (chunk: Buffer) => {
          headBytes += chunk.length;
          if (headBytes < 50) return;
          stdout.off('data', onData);
          if (reader === 'closes') stdout.destroy();
          else stdout.pause();
        };
        stdout.on('data', onData);
      },
    });
    gateway = started;
    const adminUrl = `http://${INSIDER}:${ports.admin}`;
    await waitUntilHealthy(adminUrl, started);
    // The log is batched (flushed at least every second): wait for the reader's 50 bytes.
    await waitFor('the first 50 bytes of stdout', async () => (headBytes >= 50 ? true : undefined));
    return { gateway: started, httpsUrl: `https://${INSIDER}:${ports.https}`, adminUrl };
  }

  /** Traffic that logs: every 404 is a debug line. */
  async function logALot(httpsUrl: string): Promise<void> {
    const agent = new Agent({ keepAlive: true, maxSockets: 16, ca });
    try {
      const statuses = await mapBounded(
        Array.from({ length: LOGGED_REQUESTS }),
        16,
        async (_item, index) => (await call(`${httpsUrl}/no-such-route-${index}`, { agent, timeoutMs: 5000 })).status,
      );
      expect(new Set(statuses)).toEqual(new Set([404]));
    } finally {
      agent.destroy();
    }
    // The logger's one-second flush runs into the broken sink.
    await sleep(1500);
  }

  async function expectServing(httpsUrl: string, adminUrl: string): Promise<void> {
    expect((await adminGet(adminUrl, '/healthz')).status).toBe(200);
    expect((await call(`${httpsUrl}/.well-known/jwks.json`, { ca, timeoutMs: 5000 })).status).toBe(200);
  }

  async function expectSigtermEnds(processUnderTest: RunningProcess): Promise<void> {
    processUnderTest.child.kill('SIGTERM');
    const exit = await exitWithin(processUnderTest, 10_000);
    expect(exit, `still running 10 s after SIGTERM with a broken stdout; stderr:\n${processUnderTest.stderr().slice(-2000)}`).toBeDefined();
    expect(exit!.signal).toBeNull();
  }

  it('keeps serving and exits on SIGTERM when its stdout reader stops reading (full pipe)', async () => {
    const { gateway: running, httpsUrl, adminUrl } = await startWithHeadReader('stops-reading');
    await logALot(httpsUrl);
    await expectServing(httpsUrl, adminUrl);
    await expectSigtermEnds(running);
  }, 60_000);

  it('keeps serving, counts the dropped lines, reports once on stderr and exits on SIGTERM when its stdout reader closes (EPIPE)', async () => {
    const { gateway: running, httpsUrl, adminUrl } = await startWithHeadReader('closes');
    await logALot(httpsUrl);
    await expectServing(httpsUrl, adminUrl);
    const metrics = (await adminGet(adminUrl, '/metrics')).body;
    await expectSigtermEnds(running);

    expect(metricSum(metrics, 'gateway_log_lines_dropped_total')).toBeGreaterThan(0);
    // Reported on stderr once (then dropped), not once per lost line.
    const stderrLines = running
      .stderr()
      .split('\n')
      .filter((line) => line.trim() !== '');
    expect(stderrLines.length, running.stderr()).toBeGreaterThanOrEqual(1);
    expect(stderrLines.length, running.stderr()).toBeLessThan(10);
  }, 60_000);
});
