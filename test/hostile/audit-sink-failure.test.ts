import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSandboxConnector, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { RELAXED_LIMITS } from '../support/auth-requests.js';
import { PASSWORD, rawTestConfig, testCertificatePem, writeTestConfig } from '../support/gateway-fixture.js';
import { freePort } from '../support/ports.js';
import { builtEntryPoints, spawnEntry, type BuiltEntryPoints, type RunningProcess } from '../support/process.js';
import {
  adminGet,
  call,
  CARDS_PATH,
  exitWithin,
  expectCodedError,
  expectRetryAfter,
  fillVolume,
  INSIDER,
  INSIDERS_ONLY,
  JWKS_PATH,
  LOGIN_PATH,
  loginOverTls,
  mapBounded,
  metricSum,
  OUTSIDER,
  waitUntilHealthy,
  type HttpAnswer,
} from './support.js';
import { waitFor } from '../support/wait.js';

/**
 * Issue 8, attack 1 (D26): the audit trail on a volume that fills up. Audited requests fail
 * closed with 503 `audit_unavailable` while a line cannot be written, /readyz says why, the
 * process keeps answering everything else, service comes back by itself when the disk has room
 * again, and SIGTERM still ends the process. Old code: the first failed write froze the process
 * for good (no answer on any listener, SIGTERM ignored).
 */

const AUDIT_UNAVAILABLE = 'Audit trail unavailable, retry later';
/** Per request: a frozen gateway must fail the test, never hang it. */
const REQUEST_TIMEOUT_MS = 3000;

describe('audit sink failure (D26)', () => {
  let entry: BuiltEntryPoints;
  let connector: RunningSandboxConnector;
  let ca: string;
  /** A 256 KiB tmpfs, or undefined with the reason when it could not be mounted. */
  let volume: string | undefined;
  let mountProblem = '';
  /**
   * A device that fails every write with ENOSPC: a private node of /dev/full (char 1,7) in a
   * temp folder, so nothing the gateway does to its audit file (mode bits, D21) touches the
   * system's /dev/full. /dev/full itself when mknod is not allowed.
   */
  let fullDevice = '/dev/full';
  let deviceDir: string | undefined;
  const started: RunningProcess[] = [];

  beforeAll(async () => {
    ca = await testCertificatePem();
    connector = await startSandboxConnector({ host: INSIDER, port: 0, controls: true });
    const dir = mkdtempSync(join(tmpdir(), 'gw-audit-volume-'));
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=256k', 'tmpfs', dir], { stdio: 'pipe' });
      volume = dir;
    } catch (error) {
      mountProblem = `${(error as Error).message}`.trim();
      rmSync(dir, { recursive: true, force: true });
    }
    deviceDir = mkdtempSync(join(tmpdir(), 'gw-full-device-'));
    try {
      execFileSync('mknod', [join(deviceDir, 'full'), 'c', '1', '7'], { stdio: 'pipe' });
      fullDevice = join(deviceDir, 'full');
    } catch {
      // not root: the system's /dev/full
    }
    entry = await builtEntryPoints();
  }, 120_000);

  afterEach(async () => {
    for (const gateway of started.splice(0)) await gateway.kill();
  });

  afterAll(async () => {
    if (volume) {
      try {
        execFileSync('umount', [volume], { stdio: 'pipe' });
      } finally {
        rmSync(volume, { recursive: true, force: true });
      }
    }
    if (deviceDir) rmSync(deviceDir, { recursive: true, force: true });
    await connector?.close();
  });

  async function startGateway(auditFile: string): Promise<{ gateway: RunningProcess; httpsUrl: string; adminUrl: string }> {
    const ports = { https: await freePort(), admin: await freePort() };
    const written = await writeTestConfig(
      await rawTestConfig({
        listeners: { https: { host: INSIDER, port: ports.https }, admin: { host: INSIDER, port: ports.admin } },
        trustedProxies: [],
        allowlist: INSIDERS_ONLY,
        connector: { url: connector.url, timeoutMs: 2000 },
        rateLimits: RELAXED_LIMITS,
        audit: { file: auditFile },
      }),
    );
    const gateway = spawnEntry(entry.mainJs, written.file);
    started.push(gateway);
    const adminUrl = `http://${INSIDER}:${ports.admin}`;
    await waitUntilHealthy(adminUrl, gateway);
    return { gateway, httpsUrl: `https://${INSIDER}:${ports.https}`, adminUrl };
  }

  const cardBody = () => JSON.stringify({ requestId: randomUUID(), cardLimit: 10_000, currency: 'EUR' });

  function createCard(httpsUrl: string, token: string): Promise<HttpAnswer> {
    return call(`${httpsUrl}${CARDS_PATH}`, { ca, headers: { authorization: `Bearer ${token}` }, body: cardBody(), timeoutMs: REQUEST_TIMEOUT_MS });
  }

  function login(httpsUrl: string): Promise<HttpAnswer> {
    return call(`${httpsUrl}${LOGIN_PATH}`, { ca, body: JSON.stringify({ username: 'full', password: PASSWORD }), timeoutMs: REQUEST_TIMEOUT_MS });
  }

  it('answers audited requests 503 audit_unavailable while the audit volume is full, serves the rest, and recovers by itself', async () => {
    const auditFile = volume ? join(volume, 'audit.jsonl') : fullDevice;
    const { httpsUrl, adminUrl } = await startGateway(auditFile);

    // Healthy first: audited requests work and their lines are written. (On the /dev/full
    // fallback nothing can be written from the start.)
    let token: string | undefined;
    const createdCards: string[] = [];
    if (volume) {
      expect((await adminGet(adminUrl, '/readyz')).status).toBe(200);
      token = await loginOverTls(httpsUrl, ca);
      const first = await createCard(httpsUrl, token);
      expect(first.status, first.body).toBe(201);
      createdCards.push((JSON.parse(first.body) as { cardId: string }).cardId);
    }

    const filler = volume ? fillVolume(volume) : undefined;

    // Lines still fit in the audit file's last page for a while; then a write fails and the
    // gateway must fail closed. Bounded: 100 audited requests (card creations, or logins until
    // one gives a token) or 15 s.
    let refused: HttpAnswer | undefined;
    const deadline = performance.now() + 15_000;
    for (let attempt = 0; attempt < 100 && performance.now() < deadline; attempt += 1) {
      let answer: HttpAnswer;
      try {
        answer = token ? await createCard(httpsUrl, token) : await login(httpsUrl);
      } catch (error) {
        throw new Error(`the gateway stopped answering after the audit volume filled up (attempt ${attempt + 1}): ${(error as Error).message}`, {
          cause: error,
        });
      }
      if (answer.status === 201) createdCards.push((JSON.parse(answer.body) as { cardId: string }).cardId);
      else if (answer.status === 200) token = (JSON.parse(answer.body) as { accessToken: string }).accessToken;
      else {
        refused = answer;
        break;
      }
    }
    expect(refused, 'no audited request was refused while the audit volume was full').toBeDefined();
    expectRetryAfter(refused!, expectCodedError(refused!, 503, 'audit_unavailable', AUDIT_UNAVAILABLE), 5);

    // Every audited route fails closed; login too.
    const loginAnswer = await login(httpsUrl);
    expectRetryAfter(loginAnswer, expectCodedError(loginAnswer, 503, 'audit_unavailable', AUDIT_UNAVAILABLE), 5);
    if (token) {
      const card = await createCard(httpsUrl, token);
      expectRetryAfter(card, expectCodedError(card, 503, 'audit_unavailable', AUDIT_UNAVAILABLE), 5);
    }

    // /readyz says why; the process is alive; what is not audited still answers.
    const readyz = await adminGet(adminUrl, '/readyz');
    expect(readyz.status).toBe(503);
    expect(JSON.parse(readyz.body)).toMatchObject({ checks: { audit: 'unavailable' } });
    expect((await adminGet(adminUrl, '/healthz')).status).toBe(200);
    const jwks = await call(`${httpsUrl}${JWKS_PATH}`, { ca, timeoutMs: REQUEST_TIMEOUT_MS });
    expect(jwks.status).toBe(200);
    expect(JSON.parse(jwks.body)).toMatchObject({ keys: expect.any(Array) });
    // Allowlist refusals still get 403 (their audit is aggregated, D25).
    const outsider = await call(`${httpsUrl}${JWKS_PATH}`, { ca, localAddress: OUTSIDER, timeoutMs: REQUEST_TIMEOUT_MS });
    expectCodedError(outsider, 403, 'address_not_allowed', 'Client address is not allowed');

    const metrics = (await adminGet(adminUrl, '/metrics')).body;
    expect(metricSum(metrics, 'gateway_audit_writable')).toBe(0);
    expect(metricSum(metrics, 'gateway_audit_write_failures_total')).toBeGreaterThanOrEqual(1);

    // Recovery half: needs a volume whose space can be given back.
    if (!filler) {
      throw new Error(
        `could not mount a tmpfs for the audit volume (${mountProblem}); the failure half ran on ${fullDevice}, ` +
          'but recovery cannot be shown without a volume that gets space back: run this suite as root (CI does)',
      );
    }
    rmSync(filler);
    // No restart, no signal: the gateway retries every second and comes back by itself.
    await waitFor('/readyz to report the audit trail writable again', async () => {
      const answer = await adminGet(adminUrl, '/readyz');
      return answer.status === 200 ? answer : undefined;
    });
    const back = await login(httpsUrl);
    expect(back.status, back.body).toBe(200);
    token = (JSON.parse(back.body) as { accessToken: string }).accessToken;
    const card = await createCard(httpsUrl, token);
    expect(card.status, card.body).toBe(201);
    createdCards.push((JSON.parse(card.body) as { cardId: string }).cardId);
    expect(metricSum((await adminGet(adminUrl, '/metrics')).body, 'gateway_audit_writable')).toBe(1);

    // Lines that could not be written were kept and written once there was room: every card
    // the gateway handed out has its card.created line.
    await waitFor('a card.created audit line for every card answered 201', async () => {
      const text = readFileSync(auditFile, 'utf8');
      return createdCards.every((cardId) => text.includes(`"cardId":"${cardId}"`)) ? true : undefined;
    });
  }, 60_000);

  it('keeps answering /healthz under an outsider flood with audit.file /dev/full, and SIGTERM still ends it', async () => {
    const { gateway, httpsUrl, adminUrl } = await startGateway(fullDevice);

    // A client outside the allowlist hammers the gateway: 300 requests, 20 at a time, each on
    // its own TLS connection (the gateway closes refused connections).
    // A frozen gateway stops the flood at the first unanswered request (bounded test time).
    let stalled = false;
    const outcomes = await mapBounded(Array.from({ length: 300 }), 20, async (): Promise<HttpAnswer | string> => {
      if (stalled) return 'not sent: the gateway had stopped answering';
      try {
        return await call(`${httpsUrl}${JWKS_PATH}`, { ca, localAddress: OUTSIDER, timeoutMs: REQUEST_TIMEOUT_MS });
      } catch (error) {
        stalled = true;
        return (error as Error).message;
      }
    });
    const failures = outcomes.filter((outcome): outcome is string => typeof outcome === 'string');
    expect(failures.slice(0, 3), `${failures.length} of 300 outsider requests got no answer or were not sent after one got none`).toEqual([]);
    for (const answer of outcomes as HttpAnswer[]) {
      expectCodedError(answer, 403, 'address_not_allowed', 'Client address is not allowed');
      expect(answer.headers['connection']).toBe('close');
    }

    // An audited request makes the gateway write to /dev/full for certain.
    // Whether it answers 200 (the line fails after the answer) or 503 is up to the gateway;
    // it must answer.
    const audited = await login(httpsUrl);
    expect([200, 503]).toContain(audited.status);

    // The admin listener still answers (adminGet's hang guard: a busy machine answers late, not never).
    const health = await adminGet(adminUrl, '/healthz');
    expect(health.status).toBe(200);

    // SIGTERM ends it within its drain time, even with audit lines that can never be written.
    gateway.child.kill('SIGTERM');
    const exit = await exitWithin(gateway, 10_000);
    expect(exit, `still running 10 s after SIGTERM; stderr:\n${gateway.stderr().slice(-2000)}`).toBeDefined();
    expect(exit!.signal).toBeNull();
  }, 60_000);
});
