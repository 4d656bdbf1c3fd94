import { readFileSync, renameSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  credentialsYaml,
  DEFAULT_CREDENTIALS,
  PASSWORD,
  productionSafeOverrides,
  rawTestConfig,
  testCertificatePem,
  writeTestConfig,
  type RawConfig,
  type WrittenConfig,
} from '../support/gateway-fixture.js';
import { freePort } from '../support/ports.js';
import { builtEntryPoints, spawnEntry, type BuiltEntryPoints, type RunningProcess } from '../support/process.js';
import { realRequest } from '../transport/real-clients.js';
import { waitFor } from '../support/wait.js';

/**
 * D22 and D7 on the real process: SIGHUP reloads credentials and allowlists without a restart;
 * a bad new config is refused with `file: field: problem` and the running one stays.
 */

/** Every file this test writes carries this mtime, so the gateway's file watcher never fires and only SIGHUP can reload. */
const FIXED_MTIME_SECONDS = 1_700_000_000;

/** Replaces `file` atomically (write + rename) keeping the fixed mtime. */
function replaceFile(file: string, content: string): void {
  const temporary = `${file}.next`;
  writeFileSync(temporary, content);
  utimesSync(temporary, FIXED_MTIME_SECONDS, FIXED_MTIME_SECONDS);
  renameSync(temporary, file);
}

describe('configuration reload of the running process', () => {
  let entry: BuiltEntryPoints;
  let gateway: RunningProcess;
  let written: WrittenConfig;
  let raw: RawConfig;
  let base: string;
  let ca: string;

  const login = (username: string) => realRequest(`${base}/api/v1/auth/login`, { ca, method: 'POST', body: JSON.stringify({ username, password: PASSWORD }) });
  const jwks = () => realRequest(`${base}/.well-known/jwks.json`, { ca });

  /** Sends SIGHUP and waits for the reload's outcome line. */
  async function sighup(outcome: 'configuration reloaded' | 'configuration reload refused'): Promise<Record<string, unknown>> {
    const from = gateway.lines.length;
    gateway.child.kill('SIGHUP');
    const line = await gateway.waitForLog(
      (entry) =>
        typeof entry['msg'] === 'string' && (entry['msg'].startsWith('configuration reloaded') || entry['msg'].startsWith('configuration reload refused')),
      { from },
    );
    expect(line['msg']).toMatch(new RegExp(`^${outcome}`));
    expect(line['trigger']).toBe('SIGHUP');
    return line;
  }

  beforeAll(async () => {
    [entry, ca] = await Promise.all([builtEntryPoints(), testCertificatePem()]);
    const [https, admin] = [await freePort(), await freePort()];
    raw = await rawTestConfig({
      listeners: { https: { host: '127.0.0.1', port: https }, admin: { host: '127.0.0.1', port: admin } },
      trustedProxies: [],
      allowlist: ['127.0.0.0/8', '::1/128'],
    });
    written = await writeTestConfig(raw);
    for (const file of [written.file, written.credentialsFile]) utimesSync(file, FIXED_MTIME_SECONDS, FIXED_MTIME_SECONDS);
    base = `https://127.0.0.1:${https}`;
    gateway = spawnEntry(entry.mainJs, written.file);
    await gateway.waitForLog((line) => line['msg'] === 'gateway listening');
  }, 120_000);

  afterAll(async () => {
    if (gateway && gateway.child.exitCode === null) {
      gateway.child.kill('SIGTERM');
      await Promise.race([gateway.exited, new Promise((resolve) => setTimeout(resolve, 5000).unref())]);
    }
    gateway?.kill();
  });

  it('a deactivated credential gets 401 after SIGHUP, for login and for its live access token (D7)', async () => {
    const before = await login('create-only');
    expect(before.status).toBe(200);
    const { accessToken, refreshToken } = JSON.parse(before.body) as { accessToken: string; refreshToken: string };

    const credentials = DEFAULT_CREDENTIALS.map((credential) => (credential.username === 'create-only' ? { ...credential, active: false } : credential));
    replaceFile(written.credentialsFile, await credentialsYaml(credentials));
    // Not yet reloaded: the watcher saw no change of mtime, so the credential still works.
    expect((await login('create-only')).status).toBe(200);

    const reloaded = await sighup('configuration reloaded');
    expect(reloaded['credentials']).toBe(DEFAULT_CREDENTIALS.length);

    const after = await login('create-only');
    expect(after.status).toBe(401);
    expect(JSON.parse(after.body)).toMatchObject({ status: 401, message: 'Authentication failed', details: {} });
    const refresh = await realRequest(`${base}/api/v1/auth/refresh`, {
      ca,
      method: 'POST',
      headers: { authorization: `Bearer ${accessToken}` },
      body: JSON.stringify({ refreshToken }),
    });
    expect(refresh.status).toBe(401);
    expect(JSON.parse(refresh.body)).toMatchObject({ status: 401, message: 'Credential is inactive' });
    // Other credentials are untouched.
    expect((await login('full')).status).toBe(200);
  });

  it('an invalid config is refused with file and field, and the previous one keeps serving', async () => {
    // Applied, this allowlist would shut 127.0.0.1 out.
    replaceFile(written.file, stringify({ ...raw, allowlist: ['10.0.0.0/8', '127.1'] }));
    const refused = await sighup('configuration reload refused');
    expect(refused['level']).toBe('error');
    expect(refused['problems']).toEqual([`${written.file}: allowlist[1]: "127.1" is not a four-part decimal IPv4 address or range`]);

    expect((await jwks()).status).toBe(200);
    expect((await login('full')).status).toBe(200);
    // The credentials of the last good reload stay too.
    expect((await login('create-only')).status).toBe(401);
  });

  it('a valid new allowlist applies on SIGHUP without a restart', async () => {
    replaceFile(written.file, stringify({ ...raw, allowlist: ['10.0.0.0/8'] }));
    await sighup('configuration reloaded');
    const denied = await jwks();
    expect(denied.status).toBe(403);
    expect(JSON.parse(denied.body)).toMatchObject({ status: 403, message: 'Client address is not allowed' });

    replaceFile(written.file, stringify(raw));
    await sighup('configuration reloaded');
    expect((await jwks()).status).toBe(200);
  });

  it('a change of environment is refused by a reload', async () => {
    // A production-shaped file (D32), so what is refused is the change of environment itself.
    replaceFile(written.file, stringify({ ...raw, ...(await productionSafeOverrides()) }));
    const refused = await sighup('configuration reload refused');
    expect(refused['problems']).toEqual([`${written.file}: environment: cannot change from sandbox to production without a restart`]);
    expect((await jwks()).status).toBe(200);
    replaceFile(written.file, stringify(raw));
  });

  it('wrote its audit trail inside the temp folder', async () => {
    // Audit writes are asynchronous (sonic-boom): poll until the inactive-credential denial is on disk.
    const line = await waitFor('the inactive login in the audit file', () =>
      readFileSync(join(written.dir, 'audit.jsonl'), 'utf8')
        .split('\n')
        .find((text) => text.includes('"event":"login.failed"') && text.includes('"reason":"inactive"')),
    );
    expect(JSON.parse(line)).toMatchObject({ event: 'login.failed', credential: 'cred-create', outcome: 'failure', clientAddress: '127.0.0.1' });
  });
});
