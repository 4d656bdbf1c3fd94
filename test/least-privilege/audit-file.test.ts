import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { builtEntryPoints, killAll, spawnEntry, type BuiltEntryPoints, type RunningProcess } from '../support/process.js';
import { realRequest } from '../transport/real-clients.js';
import { rawTestConfig, testCertificatePem, writeTestConfig } from '../support/gateway-fixture.js';
import { waitFor } from '../support/wait.js';

/**
 * Issue 9 row 13 (D21, D22), through the real entry point and its file audit sink: the audit
 * file is created 0640 (never readable by others, never writable by group), an existing file's
 * group/other write bits are cleared, and after the file is renamed (log rotation) a SIGHUP
 * makes the process write new lines to a new file at the original path.
 */

/** Bits a 0640 file may have; the umask may only take more away. */
const AT_MOST_0640 = 0o640;

describe('the audit file (D21, D22)', () => {
  let entry: BuiltEntryPoints;
  let ca: string;

  beforeAll(async () => {
    ca = await testCertificatePem();
    entry = await builtEntryPoints();
  }, 120_000);
  afterEach(async () => {
    await killAll();
  });

  async function start(): Promise<{ gateway: RunningProcess; https: string; auditFile: string; dir: string }> {
    const written = await writeTestConfig(await rawTestConfig({ audit: { file: 'audit/audit.jsonl' } }));
    return startWith(written.file, written.dir);
  }

  async function startWith(file: string, dir: string) {
    const gateway = spawnEntry(entry.mainJs, file);
    const listening = await gateway.waitForLog((line) => line['msg'] === 'gateway listening');
    return { gateway, https: String(listening['https']), auditFile: join(dir, 'audit', 'audit.jsonl'), dir };
  }

  let attempt = 0;
  /** One audited request (a failed login for a fresh username); returns its correlation id. */
  async function auditedRequest(https: string): Promise<string> {
    attempt += 1;
    const response = await realRequest(`${https}/api/v1/auth/login`, {
      method: 'POST',
      ca,
      body: JSON.stringify({ username: `nobody-${attempt}`, password: 'wrong' }),
    });
    expect(response.status).toBe(401);
    return String(response.headers['x-correlation-id']);
  }

  const contains = (path: string, text: string) => existsSync(path) && readFileSync(path, 'utf8').includes(text);
  const mode = (path: string) => statSync(path).mode & 0o777;

  it('creates the audit file 0640', async () => {
    const { https, auditFile } = await start();
    const id = await auditedRequest(https);
    await waitFor('the first audit line', () => (contains(auditFile, id) ? true : undefined));
    expect(mode(auditFile).toString(8), 'no bits beyond 0640').toBe((mode(auditFile) & AT_MOST_0640).toString(8));
    expect(mode(auditFile) & 0o600).toBe(0o600);
  }, 60_000);

  it('after a rename and SIGHUP, writes new lines to a new file at the original path', async () => {
    const { gateway, https, auditFile } = await start();
    const first = await auditedRequest(https);
    await waitFor('the first audit line', () => (contains(auditFile, first) ? true : undefined));

    // Rotation: the operator's tool renames the file, then signals the process.
    const rotated = `${auditFile}.1`;
    renameSync(auditFile, rotated);
    gateway.child.kill('SIGHUP');
    // Keep making audited requests until one lands in a new file at the original path.
    const sent: string[] = [];
    const landed = await waitFor('an audited request to land in a new file at the original path after SIGHUP', async () => {
      sent.push(await auditedRequest(https));
      return sent.find((id) => contains(auditFile, id));
    });
    expect(landed, `no new audit file at ${auditFile} after SIGHUP; the rotated file still receives the lines`).toBeDefined();
    expect(contains(rotated, landed!)).toBe(false);
    expect(contains(rotated, first)).toBe(true);
    expect(mode(auditFile).toString(8), 'the reopened file: no bits beyond 0640').toBe((mode(auditFile) & AT_MOST_0640).toString(8));
    // Still one JSON line per event.
    for (const line of readFileSync(auditFile, 'utf8').split('\n').filter(Boolean)) expect(() => JSON.parse(line) as unknown).not.toThrow();
  }, 60_000);

  it('clears group and other write bits of an existing audit file and appends to it', async () => {
    const written = await writeTestConfig(await rawTestConfig({ audit: { file: 'audit/audit.jsonl' } }));
    const auditFile = join(written.dir, 'audit', 'audit.jsonl');
    mkdirSync(join(written.dir, 'audit'));
    const earlier = `${JSON.stringify({ time: new Date().toISOString(), event: 'logout', correlationId: 'earlier-line' })}\n`;
    writeFileSync(auditFile, earlier);
    chmodSync(auditFile, 0o666);
    const { https } = await startWith(written.file, written.dir);
    const id = await auditedRequest(https);
    await waitFor('the audit line', () => (contains(auditFile, id) ? true : undefined));
    expect(readFileSync(auditFile, 'utf8').startsWith(earlier)).toBe(true);
    expect((mode(auditFile) & 0o022).toString(8), 'group/other write bits').toBe('0');
  }, 60_000);
});
