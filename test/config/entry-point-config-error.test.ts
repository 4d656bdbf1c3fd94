import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/ports.js';
import { builtEntryPoints, spawnEntry, type BuiltEntryPoints, type RunningProcess } from '../support/process.js';
import { rawTestConfig, writeTestConfig } from '../support/gateway-fixture.js';

/**
 * The compiled entry point refuses to start on a bad config: exit code 78 (EX_CONFIG), every
 * problem on stderr as `file: field: problem`, and no listener opened.
 */

describe('entry point with a bad config', () => {
  let entry: BuiltEntryPoints;
  const spawned: RunningProcess[] = [];

  beforeAll(async () => {
    entry = await builtEntryPoints();
  }, 120_000);
  afterEach(() => {
    for (const gateway of spawned.splice(0)) gateway.kill();
  });

  function run(file: string): RunningProcess {
    const gateway = spawnEntry(entry.mainJs, file);
    spawned.push(gateway);
    return gateway;
  }

  it('exits 78 naming the file, the field and the problem', async () => {
    const port = await freePort();
    const written = await writeTestConfig(
      await rawTestConfig({
        listeners: { https: { host: '127.0.0.1', port }, admin: { host: '127.0.0.1', port: 0 } },
        allowlist: ['127.0.0.0/8', '127.1'],
        connector: { url: 'http://127.0.0.1:9', startSandbox: true },
      }),
    );
    const gateway = run(written.file);
    const { code } = await gateway.exited;
    expect(code).toBe(78);
    expect(gateway.stderr()).toContain(`${written.file}: allowlist[1]: "127.1" is not a four-part decimal IPv4 address or range`);
    expect(gateway.stderr()).toContain(`${written.file}: connector.startSandbox: is only allowed when environment is local`);
    expect(gateway.lines.filter((line) => line.includes('gateway listening'))).toEqual([]);
  });

  it('exits 78 for a schema error', async () => {
    const written = await writeTestConfig(
      await rawTestConfig({ listeners: { https: { host: '127.0.0.1', port: 0, prot: 1 }, admin: { host: '127.0.0.1', port: 0 } } }),
    );
    const gateway = run(written.file);
    expect((await gateway.exited).code).toBe(78);
    expect(gateway.stderr()).toContain(`${written.file}: listeners.https.prot: is not a known setting`);
  });

  it('exits 78 for a problem in the credentials file, naming that file', async () => {
    const written = await writeTestConfig(await rawTestConfig());
    writeFileSync(
      written.credentialsFile,
      'credentials:\n  - id: c1\n    username: u\n    passwordHash: nope\n    issuingAccount: acct-eu\n    permissions: []\n    active: true\n',
    );
    const gateway = run(written.file);
    expect((await gateway.exited).code).toBe(78);
    expect(gateway.stderr()).toContain(`${written.credentialsFile}: credentials[0].passwordHash: must be "scrypt$N$r$p$salt$hash"`);
  });

  it('exits 78 when the config file does not exist', async () => {
    const written = await writeTestConfig(await rawTestConfig());
    const missing = join(written.dir, 'absent.yaml');
    const gateway = run(missing);
    expect((await gateway.exited).code).toBe(78);
    expect(gateway.stderr()).toContain(`${missing}: (top level): file not found`);
  });
});
