import { copyFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { productionSafeOverrides, rawTestConfig, writeTestConfig, type RawConfig, type WrittenConfig } from '../support/gateway-fixture.js';
import { certificateUntil, type ExpiringCertificate } from './expiring-certificate.js';
import { builtEntryPoints, killAll, parseLogLine, runToExit, signalAndWait, spawnEntry, type BuiltEntryPoints, type LogLine } from '../support/process.js';

/**
 * D51 through the compiled entry point: `--check-config` prints a certificate that ends within
 * 14 days as a `warning:` line and exits 0; production refuses an expired one, checked or
 * started (exit 78, no listener); a running gateway logs the warning at its start and again at a
 * reload that reads a certificate past its end (rewritten in place: a change only a restart
 * applies, which the reload names).
 */

const DAY = 86_400_000;
const RUNBOOK = 'docs/runbooks/rotate-tls-certificate.md';

let entry: BuiltEntryPoints;
const scratch: string[] = [];
beforeAll(async () => {
  entry = await builtEntryPoints();
}, 180_000);
afterEach(async () => {
  await killAll();
});
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

/** A config whose TLS files live in its own folder (tls.crt, tls.key), written from `pem`. */
async function configWith(pem: ExpiringCertificate, overrides: RawConfig = {}): Promise<WrittenConfig> {
  const written = await writeTestConfig(await rawTestConfig({ tls: { cert: { file: 'tls.crt' }, key: { file: 'tls.key' } }, ...overrides }));
  scratch.push(written.dir);
  writeTlsFiles(written.dir, pem);
  return written;
}

function writeTlsFiles(dir: string, pem: ExpiringCertificate): void {
  writeFileSync(join(dir, 'tls.crt.next'), pem.cert);
  writeFileSync(join(dir, 'tls.key.next'), pem.key, { mode: 0o600 });
  copyFileSync(join(dir, 'tls.crt.next'), join(dir, 'tls.crt'));
  copyFileSync(join(dir, 'tls.key.next'), join(dir, 'tls.key'));
}

const soon = (written: WrittenConfig, pem: ExpiringCertificate) =>
  `${written.file}: tls.cert: certificate ${join(written.dir, 'tls.crt')} expires on ${pem.endText}, within 14 days; renew it (${RUNBOOK})`;
const expired = (written: WrittenConfig, pem: ExpiringCertificate) =>
  `${written.file}: tls.cert: certificate ${join(written.dir, 'tls.crt')} expired on ${pem.endText}; renew it (${RUNBOOK})`;

describe('--check-config', () => {
  it('a certificate ending in 3 days: one warning line naming the file and the date, exit 0', async () => {
    const pem = await certificateUntil(Date.now() + 3 * DAY);
    const written = await configWith(pem);
    const result = await runToExit(process.execPath, [entry.mainJs, '--check-config', written.file]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout.split('\n').filter((line) => line.includes('tls.cert'))).toEqual([`warning: ${soon(written, pem)}`]);
  });

  it('production with an expired certificate: exit 78 naming it, checked and started alike, no listener', async () => {
    const pem = await certificateUntil(Date.now() - DAY);
    const written = await configWith(pem, await productionSafeOverrides());
    const expected = `Invalid configuration:\n  ${expired(written, pem)} (production refuses an expired certificate)\n`;
    const [check, start] = await Promise.all([
      runToExit(process.execPath, [entry.mainJs, '--check-config', written.file]),
      runToExit(process.execPath, [entry.mainJs, '--config', written.file]),
    ]);
    expect(check.code).toBe(78);
    expect(check.stderr).toBe(expected);
    expect(start.code).toBe(78);
    expect(start.stderr).toBe(expected);
    expect(start.stdout).not.toContain('gateway listening');
  });
});

describe('a running sandbox gateway', () => {
  it('logs the warning at its start, and at a reload that reads an expired certificate', async () => {
    const soonPem = await certificateUntil(Date.now() + 3 * DAY);
    const written = await configWith(soonPem);
    const gateway = spawnEntry(entry.mainJs, written.file);
    const isWarning = (text: string) => (line: LogLine) => line['msg'] === 'configuration warning' && line['problem'] === text;
    await gateway.waitForLog((line) => line['msg'] === 'gateway listening', { timeoutMs: 20_000 });
    // Logged before the listeners opened, as a warning.
    const beforeListening = gateway.lines
      .slice(
        0,
        gateway.lines.findIndex((line) => line.includes('"gateway listening"')),
      )
      .map(parseLogLine);
    expect(beforeListening.filter((line) => line && isWarning(soon(written, soonPem))(line))).toMatchObject([{ level: 'warn' }]);

    const endedPem = await certificateUntil(Date.now() - DAY);
    writeTlsFiles(written.dir, endedPem);
    const from = gateway.lines.length;
    const reloaded = await signalAndWait(gateway, 'SIGHUP', (line) => typeof line['msg'] === 'string' && line['msg'].startsWith('configuration reload'));
    expect(reloaded).toMatchObject({ level: 'info', restartNeededFor: ['tls'] });
    const warning = await gateway.waitForLog(isWarning(expired(written, endedPem)), { from, timeoutMs: 5000 });
    expect(warning).toMatchObject({ level: 'warn', trigger: 'SIGHUP' });
  }, 60_000);
});
