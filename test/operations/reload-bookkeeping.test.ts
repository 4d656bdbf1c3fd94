import { execFileSync } from 'node:child_process';
import { closeSync, constants, copyFileSync, openSync, rmSync, utimesSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import selfsigned from 'selfsigned';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RELOADABLE_SECTIONS } from '../../src/config/live-settings.js';
import {
  credentialsYaml,
  DEFAULT_CREDENTIALS,
  rawTestConfig,
  testCertificatePem,
  testKeys,
  writeTestConfig,
  type RawConfig,
  type WrittenConfig,
} from '../support/gateway-fixture.js';
import {
  builtEntryPoints,
  call,
  FIXED_MTIME_SECONDS,
  isReloadOutcome,
  killAll,
  replaceFile,
  signalAndWait,
  startGateway,
  type GatewayProcess,
} from './support.js';
import { sleep } from '../support/wait.js';

/**
 * The reload's bookkeeping on the running process (D22): a certificate and key rotated in place
 * are named as restart-only (their content is compared, not only their path); a new
 * credentialsFile path is watched from then on; a reload triggered while one runs is not lost.
 */

describe('reload bookkeeping of the running gateway', () => {
  let gateway: GatewayProcess;
  let written: WrittenConfig;
  let raw: RawConfig;
  let ca: string;

  beforeAll(async () => {
    const entry = builtEntryPoints();
    const keys = await testKeys();
    ca = await testCertificatePem();
    raw = await rawTestConfig({ tls: { cert: { file: 'tls.crt' }, key: { file: 'tls.key' } } });
    written = await writeTestConfig(raw);
    copyFileSync(keys.tlsCert, join(written.dir, 'tls.crt'));
    copyFileSync(keys.tlsKey, join(written.dir, 'tls.key'));
    for (const file of [written.file, written.credentialsFile]) utimesSync(file, FIXED_MTIME_SECONDS, FIXED_MTIME_SECONDS);
    await entry;
    gateway = await startGateway(written.file);
  }, 180_000);

  afterAll(async () => {
    await killAll();
    if (written) rmSync(written.dir, { recursive: true, force: true });
  });

  it('a TLS certificate and key rewritten at the same paths are named restart-only, and the reload lists what it applied', async () => {
    const rotated = await selfsigned.generate([{ name: 'commonName', value: 'rotated.example' }], { keyType: 'ec', curve: 'P-256', algorithm: 'sha256' });
    replaceFile(join(written.dir, 'tls.crt'), rotated.cert);
    replaceFile(join(written.dir, 'tls.key'), rotated.private);
    const line = await signalAndWait(gateway, 'SIGHUP', isReloadOutcome);
    expect(line).toMatchObject({
      level: 'info',
      trigger: 'SIGHUP',
      msg: 'configuration reloaded; changes to tls apply only at the next restart',
      restartNeededFor: ['tls'],
    });
    // The sections the reload did apply, from the one list of them.
    expect(line['applied']).toEqual(['allowlist', 'allowlistWideRangesAllowed', 'trustedProxies', 'credentialsFile', 'issuingAccounts', 'events']);
    expect(line['applied']).toEqual([...RELOADABLE_SECTIONS]);
    // Not applied: the listener still presents the certificate it started with.
    expect((await call(`${gateway.httpsUrl}/.well-known/jwks.json`, { ca })).status).toBe(200);
  });

  it('a new credentialsFile path is watched from then on', async () => {
    const moved = join(written.dir, 'credentials-moved.yaml');
    replaceFile(moved, await credentialsYaml(DEFAULT_CREDENTIALS));
    replaceFile(written.file, stringify({ ...raw, credentialsFile: 'credentials-moved.yaml' }));
    const line = await signalAndWait(gateway, 'SIGHUP', isReloadOutcome);
    expect(line['level']).toBe('info');
    expect(line['credentials']).toBe(DEFAULT_CREDENTIALS.length);

    // An edit of the new file (a new mtime) reloads by itself, naming that file.
    const from = gateway.lines.length;
    replaceFile(moved, await credentialsYaml(DEFAULT_CREDENTIALS.slice(0, 2)), Math.floor(Date.now() / 1000));
    const changed = await gateway.waitForLog(isReloadOutcome, { from, timeoutMs: 10_000 });
    expect(changed).toMatchObject({ level: 'info', trigger: `change of ${moved}`, credentials: 2 });
  });
});

/** Opens `fifo` for writing once a reader has it open (fails after `timeoutMs`). */
async function openWhenRead(fifo: string, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENXIO') throw error;
      if (Date.now() > deadline) throw new Error(`nobody opened ${fifo} for reading within ${timeoutMs} ms`, { cause: error });
      await sleep(20);
    }
  }
}

function feed(fd: number, content: string): void {
  try {
    writeSync(fd, content);
  } finally {
    closeSync(fd);
  }
}

describe('a reload triggered while one runs', () => {
  let gateway: GatewayProcess;
  let written: WrittenConfig;
  let raw: RawConfig;
  let ca: string;
  let fifo: string;
  const SECRET = 'a-shared-secret-for-the-connector';

  beforeAll(async () => {
    const entry = builtEntryPoints();
    ca = await testCertificatePem();
    // The connector's shared secret is a FIFO: a reload reading it waits until the test writes
    // it, so the test decides when a reload ends (the connector itself is never called).
    raw = await rawTestConfig({ connector: { url: 'http://127.0.0.1:9', timeoutMs: 1000, sharedSecret: { file: 'connector.secret' } } });
    written = await writeTestConfig(raw);
    fifo = join(written.dir, 'connector.secret');
    execFileSync('mkfifo', ['-m', '600', fifo]);
    for (const file of [written.file, written.credentialsFile]) utimesSync(file, FIXED_MTIME_SECONDS, FIXED_MTIME_SECONDS);
    await entry;
    const starting = startGateway(written.file);
    feed(await openWhenRead(fifo, 20_000), SECRET);
    gateway = await starting;
  }, 180_000);

  afterAll(async () => {
    await killAll();
    if (written) rmSync(written.dir, { recursive: true, force: true });
  });

  it('runs again after it, so a change made meanwhile applies', async () => {
    const jwks = () => call(`${gateway.httpsUrl}/.well-known/jwks.json`, { ca });
    expect((await jwks()).status).toBe(200);
    const from = gateway.lines.length;

    // The first reload has read the config file and waits on the secret ...
    gateway.child.kill('SIGHUP');
    const first = await openWhenRead(fifo, 10_000);
    // ... when the file changes (an allowlist without 127.0.0.1) and a second SIGHUP comes.
    replaceFile(written.file, stringify({ ...raw, allowlist: ['10.0.0.0/8'] }));
    gateway.child.kill('SIGHUP');
    await sleep(500);
    feed(first, SECRET);
    const firstOutcome = await gateway.waitForLog(isReloadOutcome, { from });
    expect(firstOutcome['msg']).toBe('configuration reloaded');

    // The second trigger was kept: the config is read once more, and its allowlist applies.
    feed(await openWhenRead(fifo, 10_000), SECRET);
    const outcomes = () => gateway.lines.slice(from).filter((text) => text.includes('"msg":"configuration reload'));
    await gateway.waitForLog(isReloadOutcome, { from: gateway.lines.indexOf(outcomes()[0] ?? '') + 1 });
    expect(outcomes()).toHaveLength(2);
    expect((await jwks()).status).toBe(403);
  });
});
