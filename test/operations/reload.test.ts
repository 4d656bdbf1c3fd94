import { rmSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandboxConnector, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { setConnectorMode } from '../support/card-fixture.js';
import { rawTestConfig, testCertificatePem, writeTestConfig, type RawConfig, type WrittenConfig } from '../support/gateway-fixture.js';
import {
  auditLines,
  builtEntryPoints,
  call,
  cardBody,
  FIXED_MTIME_SECONDS,
  isReloadOutcome,
  killAll,
  loginOver,
  metricSum,
  occupyPort,
  postCard,
  replaceFile,
  scrape,
  signalAndWait,
  startGateway,
  waitForAudit,
  type GatewayProcess,
} from './support.js';
import { connectOutcome } from '../support/ports.js';

/**
 * Reload of the running process (D22, D40): SIGHUP (or a change of the file) applies the
 * reloadable sections at once, names the changed sections that only a restart applies (and
 * leaves them as they were), refuses a bad file and keeps the running config. Each outcome is
 * audited (`config.reloaded`, `config.reload_failed`) and counted in
 * `gateway_config_reloads_total{outcome}`.
 */

describe('reload of the running gateway', () => {
  let connector: RunningSandboxConnector;
  let gateway: GatewayProcess;
  let written: WrittenConfig;
  let raw: RawConfig;
  let ca: string;
  let token: string;
  let auditFile: string;
  let heldAdminPort: number;

  const reloadBy = (signal: 'SIGHUP') => signalAndWait(gateway, signal, isReloadOutcome);

  beforeAll(async () => {
    const entry = builtEntryPoints();
    [connector, ca] = await Promise.all([startSandboxConnector({ host: '127.0.0.1', port: 0, controls: true }), testCertificatePem()]);
    // The admin port a restart-only change moves to: reserved now, released before the reload.
    const reserved = await occupyPort();
    heldAdminPort = reserved.port;
    await reserved.close();
    raw = await rawTestConfig({
      trustedProxies: [],
      connector: { url: connector.url, timeoutMs: 1000 },
      issuingAccounts: { 'acct-eu': { currencies: ['EUR'] }, 'acct-uk': { currencies: ['GBP'] } },
    });
    written = await writeTestConfig(raw);
    for (const file of [written.file, written.credentialsFile]) utimesSync(file, FIXED_MTIME_SECONDS, FIXED_MTIME_SECONDS);
    auditFile = join(written.dir, 'audit.jsonl');
    await entry;
    gateway = await startGateway(written.file);
    token = await loginOver(gateway.httpsUrl, ca);
  }, 180_000);

  afterAll(async () => {
    await killAll();
    await connector?.close();
    if (written) rmSync(written.dir, { recursive: true, force: true });
  });

  it('starts with both reload outcomes counted at 0', async () => {
    const text = await scrape(gateway.adminUrl);
    expect(metricSum(text, 'gateway_config_reloads_total', { outcome: 'success' })).toBe(0);
    expect(metricSum(text, 'gateway_config_reloads_total', { outcome: 'failure' })).toBe(0);
  });

  it('SIGHUP applies a reloadable change and names the restart-only ones, which it does not apply', async () => {
    // Before: GBP is not enabled for acct-eu (400), and the connector deadline is 1 s.
    const gbp = () => postCard(gateway.httpsUrl, ca, token, cardBody({ currency: 'GBP' }));
    expect((await gbp()).status).toBe(400);

    replaceFile(
      written.file,
      stringify({
        ...raw,
        issuingAccounts: { 'acct-eu': { currencies: ['EUR', 'GBP'] }, 'acct-uk': { currencies: ['GBP'] } },
        // The schema's largest deadline: were it applied, the held answer below would outlast the client's guard.
        connector: { url: connector.url, timeoutMs: 120_000 },
        listeners: { https: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: heldAdminPort } },
      }),
    );
    const line = await reloadBy('SIGHUP');
    expect(line).toMatchObject({
      level: 'info',
      trigger: 'SIGHUP',
      msg: 'configuration reloaded; changes to connector, listeners apply only at the next restart',
      restartNeededFor: ['connector', 'listeners'],
    });

    // Applied: acct-eu takes GBP now.
    expect((await gbp()).status).toBe(201);
    // Not applied: the connector deadline is still 1 s. The answer is held far past both deadlines
    // (closing the sandbox releases it), so only the 1 s deadline can end the call before the
    // client's own guard: with 120 s in force the call fails at that guard instead of a 504.
    await setConnectorMode(connector, { mode: 'delay', delayMs: 600_000, count: 1 });
    const slow = await postCard(gateway.httpsUrl, ca, token, cardBody(), { timeoutMs: 30_000 });
    expect(slow.status, slow.body).toBe(504);
    // ... and the admin listener stays where it was.
    expect((await call(`${gateway.adminUrl}/healthz`)).status).toBe(200);
    expect(await connectOutcome(`http://127.0.0.1:${heldAdminPort}`)).toBe('ECONNREFUSED');

    await waitForAudit(auditFile, (entry) => entry.event === 'config.reloaded' && entry.outcome === 'success' && entry.clientAddress === 'local');
    expect(metricSum(await scrape(gateway.adminUrl), 'gateway_config_reloads_total', { outcome: 'success' })).toBe(1);
  });

  it('a change back to the running sections leaves nothing pending', async () => {
    replaceFile(written.file, stringify({ ...raw, allowlist: ['10.0.0.0/8'] }));
    const line = await reloadBy('SIGHUP');
    expect(line['msg']).toBe('configuration reloaded');
    expect(line).not.toHaveProperty('restartNeededFor');
    // The allowlist applied: 127.0.0.1 is refused now.
    const refused = await call(`${gateway.httpsUrl}/.well-known/jwks.json`, { ca });
    expect(refused.status).toBe(403);
    replaceFile(written.file, stringify(raw));
    expect((await reloadBy('SIGHUP'))['msg']).toBe('configuration reloaded');
    expect((await call(`${gateway.httpsUrl}/.well-known/jwks.json`, { ca })).status).toBe(200);
  });

  it('a bad file is refused, audited and counted; the running config stays', async () => {
    const before = auditLines(auditFile).filter((entry) => entry.event === 'config.reload_failed').length;
    replaceFile(written.file, stringify({ ...raw, allowlist: ['10.0.0.0/8', '127.1'], connector: { url: connector.url, timeoutMs: 0 } }));
    const line = await reloadBy('SIGHUP');
    expect(line).toMatchObject({ level: 'error', trigger: 'SIGHUP', msg: 'configuration reload refused; the running configuration stays' });
    // Every problem of the file, in one line.
    expect(line['problems']).toEqual([
      `${written.file}: connector.timeoutMs: must be >= 1`,
      `${written.file}: allowlist[1]: "127.1" is not a four-part decimal IPv4 address or range`,
    ]);

    const failed = await waitForAudit(
      auditFile,
      (entry) => entry.event === 'config.reload_failed' && auditLines(auditFile).filter((e) => e.event === 'config.reload_failed').length > before,
    );
    expect(failed).toMatchObject({ outcome: 'failure', clientAddress: 'local' });
    expect(typeof failed['correlationId']).toBe('string');
    const text = await scrape(gateway.adminUrl);
    expect(metricSum(text, 'gateway_config_reloads_total', { outcome: 'failure' })).toBe(1);
    expect(metricSum(text, 'gateway_config_reloads_total', { outcome: 'success' })).toBe(3);
    // Still serving with the last good config: 127.0.0.1 allowed, cards created.
    expect((await postCard(gateway.httpsUrl, ca, token, cardBody())).status).toBe(201);
    replaceFile(written.file, stringify(raw));
  });

  it('a change of the file reloads without a signal, naming the file as the trigger', async () => {
    const from = gateway.lines.length;
    // A new mtime: the watcher (stat polling every 2 s) notices.
    replaceFile(written.file, stringify({ ...raw, logging: { level: 'warn' } }), Math.floor(Date.now() / 1000));
    const line = await gateway.waitForLog(isReloadOutcome, { from, timeoutMs: 10_000 });
    expect(line).toMatchObject({ trigger: `change of ${written.file}`, restartNeededFor: ['logging'] });
    // Every reload, whatever its trigger, has its audit line: three by SIGHUP, this one by the file.
    await waitForAudit(auditFile, () => auditLines(auditFile).filter((entry) => entry.event === 'config.reloaded').length === 4);
  });
});
