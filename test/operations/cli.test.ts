import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_CREDENTIALS, rawTestConfig, testKeys, writeTestConfig } from '../support/gateway-fixture.js';
import { builtEntryPoints, gatewayCli, killAll, occupyPort, REPO, runToExit, type BuiltEntryPoints } from './support.js';

/**
 * D40 through the compiled entry point: `--check-config FILE` checks without starting (exit 0
 * and one summary line, or 78 and every problem in one pass), `--version`, `--help`, exit 64
 * for a bad command line, and one line with exit 69 for a listener that cannot bind. The
 * deploy kit's own configs (compose and Kubernetes) check clean with their secrets made the
 * way deploy/README.md says.
 */

const VERSION = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string }).version;
const STACK_FRAME = /^\s+at /m;

let entry: BuiltEntryPoints;
const scratch: string[] = [];
function scratchDir(label: string): string {
  const dir = mkdtempSync(join(tmpdir(), `ops-cli-${label}-`));
  scratch.push(dir);
  return dir;
}

beforeAll(async () => {
  entry = await builtEntryPoints();
}, 180_000);
afterEach(async () => {
  await killAll();
});
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

/** Lines of a process's output, without the trailing empty one. */
const linesOf = (text: string): string[] => text.split('\n').filter((line) => line !== '');

describe('--check-config FILE', () => {
  it('exits 0 with one summary line after the warnings, for a valid sandbox config', async () => {
    const written = await writeTestConfig(await rawTestConfig());
    scratch.push(written.dir);
    const result = await gatewayCli(['--check-config', written.file]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toBe('');
    const lines = linesOf(result.stdout);
    // The sandbox test config keeps state in memory and reaches the connector over http://:
    // tolerated outside production, and said.
    expect(lines.slice(0, -1)).toEqual([
      `warning: ${written.file}: store.kind: memory keeps state in one process only; use redis`,
      `warning: ${written.file}: connector.url: plain http:// would send PAN and CVC in clear text; use https://`,
    ]);
    expect(lines.at(-1)).toBe(`${written.file}: valid (environment sandbox, ${DEFAULT_CREDENTIALS.length} credentials, 2 issuing accounts)`);
  });

  it('binds no port: a config whose listener ports are all taken still checks valid', async () => {
    const [https, plain, admin] = await Promise.all([occupyPort(), occupyPort(), occupyPort()]);
    try {
      const written = await writeTestConfig(
        await rawTestConfig({
          listeners: {
            https: { host: '127.0.0.1', port: https.port },
            plainHttp: { host: '127.0.0.1', port: plain.port },
            admin: { host: '127.0.0.1', port: admin.port },
          },
        }),
      );
      scratch.push(written.dir);
      const result = await gatewayCli(['--check-config', written.file]);
      expect(result.code, result.stderr).toBe(0);
      expect(linesOf(result.stdout).at(-1)).toMatch(/: valid \(environment sandbox, /);
      // Started for real, the same file cannot bind: the check above did not try.
      const run = await gatewayCli(['--config', written.file]);
      expect(run.code).toBe(69);
      expect(run.stderr).toBe(`card gateway: cannot listen on 127.0.0.1:${https.port} (https listener): address already in use\n`);
    } finally {
      await Promise.all([https.close(), plain.close(), admin.close()]);
    }
  });

  it('exits 78 listing every problem in one run: schema, secrets, keys, ranges, credentials file and production guards', async () => {
    const keys = await testKeys();
    const dir = scratchDir('invalid');
    const file = join(dir, 'gateway.yaml');
    const credentialsFile = join(dir, 'credentials.yaml');
    const at = (path: string) => join(dir, path);
    // A TLS key readable by others, a signing "key" that is no PEM, a card-record key of 16 bytes.
    copyFileSync(keys.tlsKey, at('tls.key'));
    chmodSync(at('tls.key'), 0o644);
    writeFileSync(at('signing.key'), 'not a key\n', { mode: 0o600 });
    writeFileSync(at('card.key'), randomBytes(16).toString('hex'), { mode: 0o600 });
    writeFileSync(at('previous-card.key'), randomBytes(32).toString('hex'), { mode: 0o600 });
    const raw = await rawTestConfig({
      environment: 'production',
      // schema: an unknown setting, and a value out of range
      listeners: { https: { host: '127.0.0.1', port: 0, prot: 8443 }, admin: { host: '127.0.0.1', port: 0 } },
      edge: { maxConnections: 0 },
      tls: { cert: { file: 'missing.crt' }, key: { file: 'tls.key' } },
      allowlist: ['127.0.0.0/8', '127.1'],
      trustedProxies: ['10.0.0.0/33'],
      tokens: {
        issuer: 'https://sandbox.test/',
        audience: 'aud',
        signingKey: { kid: 'k1', privateKey: { file: 'signing.key' } },
        verificationKeys: [{ kid: 'old', publicKey: { env: 'OLD_SIGNING_PUBLIC_KEY' } }],
      },
      cards: {
        encryptionKey: { kid: 'card-2', key: { file: 'card.key' } },
        previousEncryptionKeys: [
          { kid: 'card-1', key: { file: 'previous-card.key' } },
          { kid: 'card-1', key: { file: 'previous-card.key' } },
        ],
      },
      logging: { level: 'debug' },
    });
    writeFileSync(file, stringify(raw));
    const hash = `scrypt$16384$8$1$${randomBytes(16).toString('base64')}$${randomBytes(32).toString('base64')}`;
    writeFileSync(
      credentialsFile,
      stringify({
        credentials: [
          { id: 'c1', username: 'a', passwordHash: 'plain-text-password', issuingAccount: 'acct-eu', permissions: ['cards:create'], active: true },
          {
            id: 'c2',
            username: 'b',
            passwordHash: hash,
            issuingAccount: 'acct-nowhere',
            permissions: ['cards:create'],
            addressRanges: ['10.1.2.3/40'],
            active: true,
          },
        ],
      }),
    );

    const result = await gatewayCli(['--check-config', file], { env: { OLD_SIGNING_PUBLIC_KEY: undefined } });
    expect(result.code, result.stderr).toBe(78);
    expect(result.stdout).toBe('');
    expect(result.stderr).not.toMatch(STACK_FRAME);
    const problems = linesOf(result.stderr)
      .filter((line) => line.startsWith('  '))
      .map((line) => line.trim());
    expect(linesOf(result.stderr)[0]).toBe('Invalid configuration:');
    expect(problems.sort()).toEqual(
      [
        // schema
        `${file}: listeners.https.prot: is not a known setting`,
        `${file}: edge.maxConnections: must be >= 1`,
        // secrets that cannot be read
        `${file}: tls.cert: file ${at('missing.crt')} not found`,
        `${file}: tokens.verificationKeys[0].publicKey: environment variable OLD_SIGNING_PUBLIC_KEY is not set`,
        // keys that do not parse
        `${file}: tokens.signingKey.privateKey: is not a PEM private key`,
        `${file}: cards.encryptionKey.key: must be 32 bytes, written as 64 hex digits or base64 (AES-256-GCM, D18)`,
        `${file}: cards.previousEncryptionKeys[1].kid: duplicate kid "card-1"`,
        // address ranges
        `${file}: allowlist[1]: "127.1" is not a four-part decimal IPv4 address or range`,
        `${file}: trustedProxies[0]: "10.0.0.0/33" has an invalid prefix length`,
        // the credentials file
        `${credentialsFile}: credentials[0].passwordHash: must be "scrypt$N$r$p$salt$hash" (use npm run hash-password)`,
        `${credentialsFile}: credentials[1].addressRanges: "10.1.2.3/40" has an invalid prefix length`,
        `${credentialsFile}: credentials[1].issuingAccount: "acct-nowhere" is not in the config's issuingAccounts`,
        // production guards (D32)
        `${file}: store.kind: memory keeps state in one process only; use redis (production refuses unsafe settings)`,
        `${file}: connector.url: plain http:// would send PAN and CVC in clear text; use https:// (production refuses unsafe settings)`,
        `${file}: tls.key: file ${at('tls.key')} is accessible to group or others (mode 0644); chmod 600 it (production refuses unsafe settings)`,
        `${file}: logging.level: debug is below info; use info or higher (production refuses unsafe settings)`,
      ].sort(),
    );
  });

  it('exits 78 for a TLS key that does not match the certificate, and --config refuses the same file the same way', async () => {
    const keys = await testKeys();
    const dir = scratchDir('tls-mismatch');
    const otherKey = join(dir, 'other.key');
    writeFileSync(otherKey, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    const written = await writeTestConfig(await rawTestConfig({ tls: { cert: { file: keys.tlsCert }, key: { file: otherKey } } }));
    scratch.push(written.dir);
    const expected = `Invalid configuration:\n  ${written.file}: tls.key: does not match the certificate in tls.cert\n`;

    const [check, run] = await Promise.all([gatewayCli(['--check-config', written.file]), gatewayCli(['--config', written.file])]);
    expect(check.code, check.stdout).toBe(78);
    expect(check.stdout).toBe('');
    expect(check.stderr).toBe(expected);
    // Started for real, the same file stops before any listener, with the same line: no stack trace.
    expect(run.code, run.stderr).toBe(78);
    expect(run.stderr).toBe(expected);
    expect(run.stdout).not.toContain('gateway listening');
  });

  it('exits 78 listing a misspelled section with the TLS and key problems of the others, in one pass', async () => {
    const keys = await testKeys();
    const dir = scratchDir('one-pass');
    const notACertificate = join(dir, 'connector-ca.crt');
    writeFileSync(notACertificate, 'not a certificate\n');
    const raw = await rawTestConfig({
      tls: { cert: { file: keys.tlsCert }, key: { file: keys.otherSigningKey } },
      connector: { url: 'https://127.0.0.1:9', tls: { ca: { file: notACertificate } } },
      tokens: { signingKey: { kid: 'k1', privateKey: { file: join(dir, 'absent-signing.key') } } },
    });
    raw['alowlist'] = raw['allowlist'];
    delete raw['allowlist'];
    const written = await writeTestConfig(raw);
    scratch.push(written.dir);
    const result = await gatewayCli(['--check-config', written.file]);
    expect(result.code, result.stdout).toBe(78);
    expect(result.stderr).not.toMatch(STACK_FRAME);
    const problems = linesOf(result.stderr)
      .filter((line) => line.startsWith('  '))
      .map((line) => line.trim());
    expect(problems.sort()).toEqual(
      [
        `${written.file}: alowlist: is not a known setting`,
        `${written.file}: allowlist: is required`,
        `${written.file}: tls.key: does not match the certificate in tls.cert`,
        `${written.file}: connector.tls.ca: is not a PEM certificate`,
        `${written.file}: tokens.signingKey.privateKey: file ${join(dir, 'absent-signing.key')} not found`,
      ].sort(),
    );
  });

  it('exits 78 for a file that does not exist, and 64 without a FILE', async () => {
    const dir = scratchDir('missing');
    const missing = join(dir, 'nothing.yaml');
    const [result, bare] = await Promise.all([gatewayCli(['--check-config', missing]), gatewayCli(['--check-config'])]);
    expect(result.code).toBe(78);
    expect(result.stderr).toContain(`${missing}: (top level): file not found`);
    expect(bare.code).toBe(64);
    expect(linesOf(bare.stderr)[0]).toBe('card gateway: --check-config needs a FILE');
  });
});

describe('the deploy kit configs check valid with their secrets made as deploy/README.md says', () => {
  let state: string;

  beforeAll(async () => {
    state = scratchDir('compose-state');
    // deploy/compose/make-secrets.sh, with the compiled hash-password command (no second build).
    const result = await runToExit('bash', [join(REPO, 'deploy', 'compose', 'make-secrets.sh'), state], {
      env: { HASH_PASSWORD_COMMAND: `${JSON.stringify(process.execPath)} ${JSON.stringify(entry.hashPasswordJs)}` },
      timeoutMs: 60_000,
    });
    expect(result.code, `${result.stdout}${result.stderr}`).toBe(0);
  }, 90_000);

  /**
   * The config text with the containers' paths replaced by where the files are here; any other
   * absolute path left in it fails the test (a file the mapping does not know about).
   */
  function localised(text: string, paths: Record<string, string>): string {
    let result = text;
    for (const [container, local] of Object.entries(paths)) result = result.split(container).join(local);
    const leftover = [...result.matchAll(/\{ file: (\/[^ }]+) \}|: (\/(?:etc|run|var)\/\S+)/g)]
      .map((match) => match[1] ?? match[2] ?? '')
      .filter((path) => !Object.values(paths).some((local) => path.startsWith(local)));
    expect(leftover, 'container paths without a local file').toEqual([]);
    return result;
  }

  it('deploy/compose/config/gateway.yaml', async () => {
    const dir = scratchDir('compose');
    const text = localised(readFileSync(join(REPO, 'deploy', 'compose', 'config', 'gateway.yaml'), 'utf8'), {
      '/run/card-gateway/secrets/': `${join(state, 'secrets', 'gateway')}/`,
      '/etc/card-gateway/credentials/': `${join(state, 'credentials')}/`,
      '/var/log/card-gateway/': `${dir}/`,
    });
    writeFileSync(join(dir, 'gateway.yaml'), text);
    const result = await gatewayCli(['--check-config', join(dir, 'gateway.yaml')]);
    expect(result.code, result.stderr).toBe(0);
    // Redis with its password from a file, mutual TLS to the connector, key files 0600: nothing
    // even a production config would refuse. The warnings: no TLS to Redis on the stack's
    // internal network (D50; deploy/README.md says why), and the admin listener declared
    // exposed on that network (D62).
    expect(linesOf(result.stdout)).toEqual([
      `warning: ${join(dir, 'gateway.yaml')}: store.redis.tls: no TLS to Redis: its password and every session and card record cross the network in clear; use rediss:// (or store.redis.tls for Sentinel and Cluster)`,
      `warning: ${join(dir, 'gateway.yaml')}: listeners.admin.host: the admin listener on admin-listener serves /metrics, /healthz, /readyz and /openapi.json without authentication to whoever reaches that address (listeners.admin.exposed: true); keep it on a network only the scraper and the probes reach`,
      `${join(dir, 'gateway.yaml')}: valid (environment sandbox, 1 credentials, 2 issuing accounts)`,
    ]);
  });

  it("the Kubernetes ConfigMap config, with the README's openssl commands for the keys", async () => {
    const dir = scratchDir('kubernetes');
    const secrets = join(dir, 'secrets');
    const credentials = join(dir, 'credentials');
    mkdirSync(secrets);
    mkdirSync(credentials);
    // Step 2 of deploy/README.md's Kubernetes section: the openssl lines of its command block.
    const readme = readFileSync(join(REPO, 'deploy', 'README.md'), 'utf8');
    const opensslLines = readme
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line.startsWith('openssl '));
    expect(opensslLines.length).toBeGreaterThanOrEqual(2);
    execFileSync('bash', ['-euo', 'pipefail', '-c', opensslLines.join('\n')], { cwd: secrets, stdio: 'pipe', timeout: 30_000 });
    // The certificates the README takes as given: the compose sandbox CA's, made above.
    for (const [from, to] of [
      ['tls.crt', 'tls.crt'],
      ['tls.key', 'tls.key'],
      ['connector-ca.crt', 'connector-ca.crt'],
      ['connector-client.crt', 'connector-client.crt'],
      ['connector-client.key', 'connector-client.key'],
    ] as const) {
      copyFileSync(join(state, 'secrets', 'gateway', from), join(secrets, to));
    }
    const configMap = parse(readFileSync(join(REPO, 'deploy', 'kubernetes', 'configmap-config.yaml'), 'utf8')) as { data: Record<string, string> };
    const credentialsMap = parse(readFileSync(join(REPO, 'deploy', 'kubernetes', 'configmap-credentials.yaml'), 'utf8')) as { data: Record<string, string> };
    writeFileSync(join(credentials, 'credentials.yaml'), credentialsMap.data['credentials.yaml'] ?? '');
    const text = localised(configMap.data['gateway.yaml'] ?? '', {
      '/run/card-gateway/secrets/': `${secrets}/`,
      '/etc/card-gateway/credentials/': `${credentials}/`,
      '/var/log/card-gateway/': `${dir}/`,
    });
    const file = join(dir, 'gateway.yaml');
    writeFileSync(file, text);
    const result = await gatewayCli(['--check-config', file]);
    expect(result.code, result.stderr).toBe(0);
    const lines = linesOf(result.stdout);
    expect(lines.at(-1)).toBe(`${file}: valid (environment sandbox, 0 credentials, 2 issuing accounts)`);
    // The only warnings: key files the README's commands leave readable by others under this
    // umask (the Deployment's init container installs them 0400), no TLS to the example's
    // Redis (D50), and the admin listener declared exposed on the pod's address (D62).
    const named = (field: string) => lines.filter((line) => line.includes(`: ${field}: `));
    expect(named('store.redis.tls')).toEqual([
      `warning: ${file}: store.redis.tls: no TLS to Redis: its password and every session and card record cross the network in clear; use rediss:// (or store.redis.tls for Sentinel and Cluster)`,
    ]);
    expect(named('listeners.admin.host')).toEqual([
      `warning: ${file}: listeners.admin.host: the admin listener on 0.0.0.0 serves /metrics, /healthz, /readyz and /openapi.json without authentication to whoever reaches that address (listeners.admin.exposed: true); keep it on a network only the scraper and the probes reach`,
    ]);
    for (const warning of lines.slice(0, -1).filter((line) => !line.includes(': store.redis.tls: ') && !line.includes(': listeners.admin.host: ')))
      expect(warning).toMatch(/^warning: .*: file .* is accessible to group or others/);
  });
});

describe('--version, --help and the command line', () => {
  it('--version prints the package version and the commit, exit 0', async () => {
    // The image has no .git: there the commit comes from GATEWAY_COMMIT.
    const [result, image] = await Promise.all([gatewayCli(['--version']), gatewayCli(['--version'], { env: { GATEWAY_COMMIT: 'abc123def456' } })]);
    expect(result.code).toBe(0);
    expect(result.stderr).toBe('');
    const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: REPO, encoding: 'utf8' }).trim();
    expect(result.stdout).toBe(`card-issuing-gateway ${VERSION} (commit ${head.slice(0, 12)})\n`);
    expect(image.stdout).toBe(`card-issuing-gateway ${VERSION} (commit abc123def456)\n`);
  });

  it('--help and -h print the usage, exit 0', async () => {
    const flags = ['--help', '-h'];
    const results = await Promise.all(flags.map((flag) => gatewayCli([flag])));
    for (const [index, result] of results.entries()) {
      const flag = flags[index];
      expect(result.code, flag).toBe(0);
      expect(result.stderr).toBe('');
      expect(result.stdout).toMatch(/^Usage: node dist\/src\/main\.js/);
      for (const option of ['--config FILE', '--check-config FILE', '--version', '--help']) expect(result.stdout).toContain(option);
      expect(result.stdout).toMatch(/64 bad command line/);
    }
  });

  it('an unknown option, a missing FILE or two options exit 64 with the usage on stderr', async () => {
    const cases = [
      [['--bogus'], 'unknown option --bogus'],
      [['--config'], '--config needs a FILE'],
      [['--version', '--help'], 'one option at a time'],
      [['--config', 'a.yaml', 'b.yaml'], 'one option at a time'],
    ] as const;
    // Independent runs, two at a time.
    const results = [
      ...(await Promise.all(cases.slice(0, 2).map(([args]) => gatewayCli(args)))),
      ...(await Promise.all(cases.slice(2).map(([args]) => gatewayCli(args)))),
    ];
    for (const [index, [args, reason]] of cases.entries()) {
      const result = results[index]!;
      expect(result.code, args.join(' ')).toBe(64);
      expect(result.stdout).toBe('');
      expect(linesOf(result.stderr)[0]).toBe(`card gateway: ${reason}`);
      expect(result.stderr).toContain('Usage: node dist/src/main.js');
    }
  });
});

describe('a sandbox connector port that cannot bind', () => {
  it('the standalone connector: one line naming host and port, exit 69, no stack trace; a port that is no number: one line, exit 78', async () => {
    const busy = await occupyPort();
    try {
      const result = await runToExit(process.execPath, [entry.connectorJs], { env: { SANDBOX_CONNECTOR_PORT: String(busy.port) } });
      expect(result.code).toBe(69);
      expect(result.stderr).toBe(`sandbox connector: cannot listen on 127.0.0.1:${busy.port} (sandbox connector listener): address already in use\n`);
      expect(`${result.stdout}${result.stderr}`).not.toMatch(STACK_FRAME);
    } finally {
      await busy.close();
    }
    const bad = await runToExit(process.execPath, [entry.connectorJs], { env: { SANDBOX_CONNECTOR_PORT: '97OO' } });
    expect(bad.code).toBe(78);
    expect(bad.stderr).toBe('sandbox connector: SANDBOX_CONNECTOR_PORT: not a port number: 97OO\n');
  });

  it("the local gateway's in-process sandbox connector: the gateway's one line, exit 69, no stack trace", async () => {
    const busy = await occupyPort();
    try {
      const written = await writeTestConfig(
        await rawTestConfig({ environment: 'local', connector: { url: `http://127.0.0.1:${busy.port}`, timeoutMs: 1000, startSandbox: true } }),
      );
      scratch.push(written.dir);
      const result = await gatewayCli(['--config', written.file]);
      expect(result.code).toBe(69);
      expect(result.stderr).toBe(`card gateway: cannot listen on 127.0.0.1:${busy.port} (sandbox connector listener): address already in use\n`);
      expect(`${result.stdout}${result.stderr}`).not.toMatch(STACK_FRAME);
      expect(result.stdout).not.toContain('gateway listening');
    } finally {
      await busy.close();
    }
  });
});

describe('a listener that cannot bind', () => {
  for (const listener of ['https', 'admin'] as const) {
    it(`a busy ${listener} port: one line naming the listener, host and port, exit 69, no stack trace`, async () => {
      const busy = await occupyPort();
      try {
        const written = await writeTestConfig(
          await rawTestConfig({
            listeners: {
              https: { host: '127.0.0.1', port: listener === 'https' ? busy.port : 0 },
              admin: { host: '127.0.0.1', port: listener === 'admin' ? busy.port : 0 },
            },
          }),
        );
        scratch.push(written.dir);
        const result = await gatewayCli(['--config', written.file]);
        expect(result.code).toBe(69);
        expect(result.signal).toBeNull();
        expect(result.stderr).toBe(`card gateway: cannot listen on 127.0.0.1:${busy.port} (${listener} listener): address already in use\n`);
        expect(`${result.stdout}${result.stderr}`).not.toMatch(STACK_FRAME);
        expect(result.stdout).not.toContain('gateway listening');
      } finally {
        await busy.close();
      }
    });
  }
});
