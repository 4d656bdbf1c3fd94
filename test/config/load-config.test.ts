import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml, stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { verifyPassword } from '../../src/foundation/password-hash.js';
import { ConfigError } from '../../src/config/config-error.js';
import { ensureLocalSecrets, localSecretPaths } from '../../src/config/local-secrets.js';
import { loadConfig, type Environment } from '../../src/config/load-config.js';
import { credentialsYaml, DEFAULT_CREDENTIALS, rawTestConfig, testKeys, writeTestConfig, type RawConfig } from '../support/gateway-fixture.js';

/**
 * The config loader (validated once, every problem reported as `file: field:
 * problem`): the shipped files are valid, and each kind of mistake is named precisely.
 */

const REPO = join(import.meta.dirname, '..', '..');

interface Refusal {
  file: string;
  credentialsFile: string;
  dir: string;
  problems: readonly string[];
  message: string;
}

/** Loads a config that must be refused; optionally replaces the credentials file's content. */
async function refuse(raw: RawConfig, options: { env?: Environment; credentials?: string } = {}): Promise<Refusal> {
  const written = await writeTestConfig(raw);
  if (options.credentials !== undefined) writeFileSync(written.credentialsFile, options.credentials);
  const error: unknown = await loadConfig(written.file, options.env ?? {}).then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(ConfigError);
  const configError = error as ConfigError;
  return { file: written.file, credentialsFile: written.credentialsFile, dir: written.dir, problems: configError.problems, message: configError.message };
}

/** The refusal names exactly this problem (and the message an operator sees contains it). */
function expectProblem(refusal: Refusal, line: string): void {
  expect(refusal.problems).toContain(line);
  expect(refusal.message).toContain(line);
}

/** A raw test config with one dotted field removed. */
async function rawWithout(path: string): Promise<RawConfig> {
  const raw = await rawTestConfig();
  const parts = path.split('.');
  const last = parts.pop()!;
  let node = raw;
  for (const part of parts) {
    const copy = { ...(node[part] as RawConfig) };
    node[part] = copy;
    node = copy;
  }
  delete node[last];
  return raw;
}

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'gw-config-test-'));
}

function credentialsWith(edit: (entries: Record<string, unknown>[]) => void): Promise<string> {
  return credentialsYaml(DEFAULT_CREDENTIALS).then((text) => {
    const parsed = parseYaml(text) as { credentials: Record<string, unknown>[] };
    edit(parsed.credentials);
    return stringify(parsed);
  });
}

describe('shipped config files', () => {
  for (const environment of ['sandbox', 'production'] as const) {
    it(`config/${environment}.yaml passes the schema; only its absent secrets are reported`, async () => {
      const file = join(REPO, 'config', `${environment}.yaml`);
      const error = await loadConfig(file, {}).then(
        () => undefined,
        (thrown: unknown) => thrown,
      );
      expect(error).toBeInstanceOf(ConfigError);
      const { problems } = error as ConfigError;
      const fields = problems.map((line) => {
        const match = /^(.+?): ([^:]+): (.+)$/.exec(line);
        expect(match, line).not.toBeNull();
        expect(match![3], line).toMatch(/^file (\/.+ )?not found$|^environment variable [A-Z_]+ is not set$/);
        return match![1] === file ? match![2] : `${match![1]}: ${match![2]}`;
      });
      expect(fields.sort()).toEqual(
        [
          'tls.cert',
          'tls.key',
          'store.redis.password',
          'store.redis.tls.ca',
          'connector.tls.ca',
          'connector.tls.cert',
          'connector.tls.key',
          'tokens.signingKey.privateKey',
          'cards.encryptionKey.key',
          `/etc/card-gateway/credentials.${environment}.yaml: (top level)`,
        ].sort(),
      );
      expect(problems).toContain(`/etc/card-gateway/credentials.${environment}.yaml: (top level): file not found`);
    });

    it(`config/${environment}.yaml loads once its secrets exist`, async () => {
      const keys = await testKeys();
      const dir = tempDir();
      const raw = parseYaml(readFileSync(join(REPO, 'config', `${environment}.yaml`), 'utf8')) as Record<string, Record<string, unknown>>;
      const tls = { cert: { file: keys.tlsCert }, key: { file: keys.tlsKey } };
      raw['tls'] = tls;
      (raw['connector'] as { tls: unknown }).tls = { ca: tls.cert, cert: tls.cert, key: tls.key };
      (raw['tokens'] as { signingKey: { privateKey: unknown } }).signingKey.privateKey = { file: keys.signingKey };
      // D50: the Redis password from a file (mode 0600), and the CA of Redis's certificate.
      writeFileSync(join(dir, 'redis.password'), 'redis-secret\n', { mode: 0o600 });
      const redis = (raw['store'] as { redis: { password: unknown; tls: { ca: unknown } } }).redis;
      redis.password = { file: join(dir, 'redis.password') };
      redis.tls.ca = { file: keys.tlsCert };
      const account = Object.keys(raw['issuingAccounts']!)[0]!;
      writeFileSync(
        join(dir, 'credentials.yaml'),
        await credentialsYaml([{ id: 'cred-1', username: 'one', password: 'a long enough password', issuingAccount: account, permissions: ['cards:create'] }]),
      );
      (raw as Record<string, unknown>)['credentialsFile'] = 'credentials.yaml';
      const file = join(dir, `${environment}.yaml`);
      writeFileSync(file, stringify(raw));

      const config = await loadConfig(file, { CARD_RECORD_KEY: randomBytes(32).toString('base64') });
      expect(config.environment).toBe(environment);
      // Nothing unsafe left to warn about, Redis included (D32, D50).
      expect(config.warnings).toEqual([]);
      expect(config.store).toMatchObject({ kind: 'redis', keyPrefix: `cig:${environment}:`, password: 'redis-secret', commandTimeoutMs: 300 });
      expect(config.tokens.audience).toBe(`card-issuing-${environment}`);
      expect(config.tokens.algorithm).toBe('EdDSA');
      expect(config.listeners.admin.host).toBe('127.0.0.1');
      expect(config.listeners.plainHttp).toBeUndefined();
      expect(config.trustedProxies.contains('10.20.3.4')).toBe(true);
      expect(config.trustedProxies.contains('10.21.0.1')).toBe(false);
      expect(config.allowlist.contains('127.0.0.1')).toBe(false);
      expect(config.cards.encryptionKey.key).toHaveLength(32);
      expect(config.cards.bodyLimitBytes).toBe(16384);
      expect(config.rateLimits).toEqual({
        login: { points: 5, windowSeconds: 60 },
        refresh: { points: 5, windowSeconds: 60 },
        loginPerAddress: { points: 30, windowSeconds: 60 },
        cardReads: { points: 300, windowSeconds: 60 },
        cardStatusChanges: { points: 60, windowSeconds: 60 },
        loginLockout: { maxConsecutiveFailures: 10, lockoutSeconds: 1800 },
      });
      expect(config.connector.tls?.ca).toBeDefined();
      expect(config.connector.startSandbox).toBe(false);
      expect(config.audit).toEqual({ file: '/var/log/card-gateway/audit.jsonl', fsync: true, maxDenialLinesPerMinute: 1000 });
      expect(config.credentials.byUsername('one')?.issuingAccount).toBe(account);
      expect(Object.isFrozen(config)).toBe(true);
    });
  }

  it('sandbox and production differ in everything D8 keeps apart', () => {
    const sandbox = parseYaml(readFileSync(join(REPO, 'config', 'sandbox.yaml'), 'utf8')) as Record<string, Record<string, unknown>>;
    const production = parseYaml(readFileSync(join(REPO, 'config', 'production.yaml'), 'utf8')) as Record<string, Record<string, unknown>>;
    expect(sandbox['tokens']!['issuer']).not.toBe(production['tokens']!['issuer']);
    expect(sandbox['tokens']!['audience']).not.toBe(production['tokens']!['audience']);
    expect(JSON.stringify(sandbox['tokens']!['signingKey'])).not.toBe(JSON.stringify(production['tokens']!['signingKey']));
    expect(sandbox['credentialsFile']).not.toBe(production['credentialsFile']);
    expect((sandbox['store']!['redis'] as RawConfig)['keyPrefix']).not.toBe((production['store']!['redis'] as RawConfig)['keyPrefix']);
  });

  it('config/local.yaml loads with the local secrets generated where it names them, beside it, and the demo credential', async () => {
    const root = tempDir();
    mkdirSync(join(root, 'config'));
    copyFileSync(join(REPO, 'config', 'local.yaml'), join(root, 'config', 'local.yaml'));
    copyFileSync(join(REPO, 'config', 'credentials.local.yaml'), join(root, 'config', 'credentials.local.yaml'));
    const paths = await localSecretPaths(join(root, 'config', 'local.yaml'));
    const local = join(root, 'config', '.local');
    expect(paths).toEqual({
      tlsCert: join(local, 'tls.crt'),
      tlsKey: join(local, 'tls.key'),
      signingKey: join(local, 'signing.key'),
      cardRecordKey: join(local, 'card-record.key'),
      auditFile: join(local, 'audit.jsonl'),
      connectorEventsSecret: join(local, 'connector-events.secret'),
      webhookSecrets: [join(local, 'events-webhook.secret')],
    });
    const created = await ensureLocalSecrets(paths!);
    expect(created.sort()).toEqual(
      ['card-record.key', 'connector-events.secret', 'events-webhook.secret', 'signing.key', 'tls.crt', 'tls.key'].map((name) => join(local, name)),
    );
    // The webhook secret in Standard Webhooks' form, 32 random bytes; the connector's, 32 too.
    const webhookSecret = readFileSync(join(local, 'events-webhook.secret'), 'utf8');
    expect(webhookSecret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(webhookSecret.slice('whsec_'.length), 'base64')).toHaveLength(32);
    expect(Buffer.from(readFileSync(join(local, 'connector-events.secret'), 'utf8'), 'base64url')).toHaveLength(32);
    // Nothing beside the copy's folder: the copy's secrets are its own.
    expect(existsSync(join(root, '.local'))).toBe(false);

    const config = await loadConfig(join(root, 'config', 'local.yaml'), {});
    expect(config.environment).toBe('local');
    expect(config.store).toEqual({ kind: 'memory' });
    expect(config.connector).toMatchObject({ url: 'http://127.0.0.1:9700', startSandbox: true });
    expect(config.listeners).toEqual({
      https: { host: '127.0.0.1', port: 8443 },
      plainHttp: { host: '127.0.0.1', port: 8080 },
      admin: { host: '127.0.0.1', port: 8442, exposed: false },
      connector: { host: '127.0.0.1', port: 8445 },
    });
    // The event secrets it generated are the ones it reads.
    expect(config.connector.eventsSecret).toBe(readFileSync(join(local, 'connector-events.secret'), 'utf8'));
    expect(config.events.endpoints).toMatchObject([
      { id: 'local-listener', issuingAccount: 'acct-local-eu', url: 'http://127.0.0.1:9800/events', secrets: [webhookSecret] },
    ]);
    expect(config.allowlist.contains('127.0.0.1')).toBe(true);
    expect(config.allowlist.contains('::1')).toBe(true);
    expect(config.allowlist.contains('10.0.0.1')).toBe(false);
    expect(config.audit.file).toBe(join(local, 'audit.jsonl'));
    const demo = config.credentials.byUsername('demo');
    expect(demo?.active).toBe(true);
    expect(await verifyPassword('local-demo-password', demo!.passwordHash)).toBe(true);
    // A second start reuses the secrets instead of regenerating them.
    expect(await ensureLocalSecrets(paths!)).toEqual([]);
    // Only a local config names secrets to generate.
    expect(await localSecretPaths(join(REPO, 'config', 'sandbox.yaml'))).toBeUndefined();
  });

  it('the fixture-shaped config loads with every default applied', async () => {
    const written = await writeTestConfig(await rawTestConfig());
    const config = await loadConfig(written.file, {});
    expect(config.tokens).toMatchObject({ algorithm: 'EdDSA', accessTokenTtlSeconds: 3600, refreshTokenTtlSeconds: 86400, refreshGraceSeconds: 60 });
    expect(config.logging.level).toBe('info');
    expect(config.credentials.size).toBe(DEFAULT_CREDENTIALS.length);
    expect(config.credentialsFile).toBe(written.credentialsFile);
  });

  it('is frozen all the way down: nested sections and the accounts map refuse changes', async () => {
    const config = await loadConfig((await writeTestConfig(await rawTestConfig())).file, {});
    // The types say readonly; these casts are what code that ignored them would do at run time.
    const login = config.rateLimits.login as { points: number };
    const lockout = config.rateLimits.loginLockout as { maxConsecutiveFailures: number };
    const accounts = config.issuingAccounts as unknown as Map<string, ReadonlySet<string>> & Record<string, unknown>;
    const euro = config.issuingAccounts.get('acct-eu') as Set<string>;

    // ES modules run in strict mode, where writing to a frozen object throws instead of being ignored.
    expect(() => {
      login.points = 1_000_000;
    }).toThrow(TypeError);
    expect(() => {
      lockout.maxConsecutiveFailures = 1_000_000;
    }).toThrow(TypeError);
    expect(() => accounts.set('acct-new', new Set(['USD']))).toThrow(TypeError);
    expect(() => {
      accounts['acct-new'] = new Set(['USD']);
    }).toThrow(TypeError);
    expect(() => euro.add('GBP')).toThrow(TypeError);
    // forEach's third argument must be the read-only view too, not the Map behind it.
    config.issuingAccounts.forEach((_currencies, _account, self) => {
      expect(() => (self as Map<string, ReadonlySet<string>>).set('acct-new', new Set())).toThrow(TypeError);
    });

    expect(config.rateLimits.login.points).toBe(5);
    expect(config.rateLimits.loginLockout.maxConsecutiveFailures).toBe(10);
    expect([...config.issuingAccounts.keys()]).toEqual(['acct-eu', 'acct-uk']);
    expect(config.issuingAccounts.has('acct-new')).toBe(false);
    expect([...config.issuingAccounts.get('acct-eu')!]).toEqual(['EUR', 'USD']);
  });
});

describe('config errors name the file, the field and the problem', () => {
  it('an unknown setting', async () => {
    const refusal = await refuse(
      await rawTestConfig({ listeners: { https: { host: '127.0.0.1', port: 0, prot: 8443 }, admin: { host: '127.0.0.1', port: 0 } } }),
    );
    expect(refusal.problems).toEqual([`${refusal.file}: listeners.https.prot: is not a known setting`]);
  });

  it('an unknown top-level setting', async () => {
    const refusal = await refuse(await rawTestConfig({ allowList: ['127.0.0.1/32'] }));
    expectProblem(refusal, `${refusal.file}: allowList: is not a known setting`);
  });

  it('a wrong type, never coerced', async () => {
    const refusal = await refuse(await rawTestConfig({ listeners: { https: { host: '127.0.0.1', port: '8443' }, admin: { host: '127.0.0.1', port: 0 } } }));
    expect(refusal.problems).toEqual([`${refusal.file}: listeners.https.port: must be integer`]);
  });

  it('a missing required field', async () => {
    const refusal = await refuse(await rawWithout('tokens.issuer'));
    expect(refusal.problems).toEqual([`${refusal.file}: tokens.issuer: is required`]);
  });

  it('a value outside a fixed list, as one line naming the choices', async () => {
    const refusal = await refuse(await rawTestConfig({ environment: 'staging' }));
    expect(refusal.problems).toEqual([`${refusal.file}: environment: must be one of ["local","sandbox","production"]`]);
  });

  it('a secret reference that names both a file and an env var', async () => {
    const keys = await testKeys();
    const refusal = await refuse(await rawTestConfig({ tls: { cert: { file: keys.tlsCert, env: 'TLS_CERT' }, key: { file: keys.tlsKey } } }));
    expect(refusal.problems).toEqual([`${refusal.file}: tls.cert: must be exactly one of { file } or { env }`]);
  });

  it('a bad CIDR in the allowlist, by index', async () => {
    const refusal = await refuse(await rawTestConfig({ allowlist: ['127.0.0.0/8', '10.0.0.0/33', 'not-an-address', '2001:db8::/129'] }));
    expect(refusal.problems).toEqual([
      `${refusal.file}: allowlist[1]: "10.0.0.0/33" has an invalid prefix length`,
      `${refusal.file}: allowlist[2]: "not-an-address" is not a four-part decimal IPv4 address or range`,
      `${refusal.file}: allowlist[3]: "2001:db8::/129" has an invalid prefix length`,
    ]);
  });

  it('shorthand, hex and octal IPv4 are refused', async () => {
    const refusal = await refuse(await rawTestConfig({ allowlist: ['127.0.0.1/32', '127.1', '0x7f.0.0.1', '010.0.0.1/32'], trustedProxies: ['10.1'] }));
    expectProblem(refusal, `${refusal.file}: allowlist[1]: "127.1" is not a four-part decimal IPv4 address or range`);
    expectProblem(refusal, `${refusal.file}: allowlist[2]: "0x7f.0.0.1" is not a four-part decimal IPv4 address or range`);
    expectProblem(refusal, `${refusal.file}: allowlist[3]: "010.0.0.1/32" is not a four-part decimal IPv4 address or range`);
    expectProblem(refusal, `${refusal.file}: trustedProxies[0]: "10.1" is not a four-part decimal IPv4 address or range`);
  });

  it('a secret environment variable that is not set', async () => {
    const refusal = await refuse(await rawTestConfig({ cards: { encryptionKey: { kid: 'card-1', key: { env: 'GW_TEST_CARD_KEY' } } } }), {
      env: { GW_TEST_CARD_KEY: '' },
    });
    expect(refusal.problems).toEqual([`${refusal.file}: cards.encryptionKey.key: environment variable GW_TEST_CARD_KEY is not set`]);
  });

  it('a secret read from an environment variable when it is set', async () => {
    const written = await writeTestConfig(await rawTestConfig({ cards: { encryptionKey: { kid: 'card-1', key: { env: 'GW_TEST_CARD_KEY' } } } }));
    const key = randomBytes(32);
    const config = await loadConfig(written.file, { GW_TEST_CARD_KEY: key.toString('hex') });
    expect(config.cards.encryptionKey.key.equals(key)).toBe(true);
  });

  it('a secret file that does not exist, resolved from the config folder', async () => {
    const keys = await testKeys();
    const refusal = await refuse(await rawTestConfig({ tls: { cert: { file: 'missing/tls.crt' }, key: { file: keys.tlsKey } } }));
    expect(refusal.problems).toEqual([`${refusal.file}: tls.cert: file ${join(refusal.dir, 'missing', 'tls.crt')} not found`]);
  });

  it('an encryption key of the wrong length', async () => {
    const dir = tempDir();
    const short = join(dir, 'short.key');
    writeFileSync(short, randomBytes(16).toString('base64'));
    const refusal = await refuse(await rawTestConfig({ cards: { encryptionKey: { kid: 'card-1', key: { file: short } } } }));
    expect(refusal.problems).toEqual([`${refusal.file}: cards.encryptionKey.key: must be 32 bytes, written as 64 hex digits or base64 (AES-256-GCM, D18)`]);
  });

  it('a signing key of the wrong type for the algorithm', async () => {
    const dir = tempDir();
    const p256 = join(dir, 'p256.key');
    writeFileSync(p256, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }));
    const eddsa = await refuse(await rawTestConfig({ tokens: { signingKey: { kid: 'k1', privateKey: { file: p256 } } } }));
    expect(eddsa.problems).toEqual([`${eddsa.file}: tokens.signingKey.privateKey: is a ec key, but tokens.algorithm EdDSA needs an Ed25519 key`]);

    const keys = await testKeys();
    const es256 = await refuse(await rawTestConfig({ tokens: { algorithm: 'ES256', signingKey: { kid: 'k1', privateKey: { file: keys.signingKey } } } }));
    expect(es256.problems).toEqual([`${es256.file}: tokens.signingKey.privateKey: is a ed25519 key, but tokens.algorithm ES256 needs a P-256 key`]);
  });

  it('a signing key file that is not a PEM private key', async () => {
    const keys = await testKeys();
    const refusal = await refuse(await rawTestConfig({ tokens: { signingKey: { kid: 'k1', privateKey: { file: keys.cardKey } } } }));
    expect(refusal.problems).toEqual([`${refusal.file}: tokens.signingKey.privateKey: is not a PEM private key`]);
  });

  it('a verification key of the wrong type, by index', async () => {
    const dir = tempDir();
    const p256 = join(dir, 'p256.pub');
    writeFileSync(p256, generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'pem' }));
    const keys = await testKeys();
    const refusal = await refuse(
      await rawTestConfig({
        tokens: {
          verificationKeys: [
            { kid: 'old-1', publicKey: { file: keys.otherPublicKey } },
            { kid: 'old-2', publicKey: { file: p256 } },
          ],
        },
      }),
    );
    expect(refusal.problems).toEqual([`${refusal.file}: tokens.verificationKeys[1].publicKey: is a ec key, but tokens.algorithm EdDSA needs an Ed25519 key`]);
  });

  it('startSandbox outside the local environment', async () => {
    const refusal = await refuse(await rawTestConfig({ connector: { url: 'http://127.0.0.1:9700', startSandbox: true } }));
    expect(refusal.problems).toEqual([`${refusal.file}: connector.startSandbox: is only allowed when environment is local`]);
  });

  it('a config file that is not YAML', async () => {
    const written = await writeTestConfig(await rawTestConfig());
    writeFileSync(written.file, 'environment: [sandbox\nlisteners: {');
    const error = await loadConfig(written.file, {}).then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems[0]).toMatch(
      new RegExp(`^${written.file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: \\(top level\\): cannot be read or parsed \\(`),
    );
  });

  it('a config file that does not exist', async () => {
    const missing = join(tempDir(), 'nope.yaml');
    const error = await loadConfig(missing, {}).then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect((error as ConfigError).problems).toEqual([`${missing}: (top level): file not found`]);
  });

  it('several schema problems at once', async () => {
    const raw = await rawWithout('tokens.issuer');
    raw['listeners'] = { https: { host: '127.0.0.1', port: 'x', prot: 1 }, admin: { host: '127.0.0.1', port: 0 } };
    raw['bogus'] = true;
    const refusal = await refuse(raw);
    expect([...refusal.problems].sort()).toEqual(
      [
        `${refusal.file}: tokens.issuer: is required`,
        `${refusal.file}: listeners.https.port: must be integer`,
        `${refusal.file}: listeners.https.prot: is not a known setting`,
        `${refusal.file}: bogus: is not a known setting`,
      ].sort(),
    );
  });

  it('several semantic problems at once, across the config and the credentials file', async () => {
    const keys = await testKeys();
    const credentials = await credentialsWith((entries) => {
      entries[0]!['passwordHash'] = 'plaintext';
    });
    const refusal = await refuse(
      await rawTestConfig({
        allowlist: ['127.0.0.1/32', '127.1'],
        tls: { cert: { file: 'absent.crt' }, key: { file: keys.tlsKey } },
        connector: { url: 'http://127.0.0.1:9700', startSandbox: true },
        cards: { encryptionKey: { kid: 'card-1', key: { env: 'GW_TEST_NOT_SET' } } },
      }),
      { credentials },
    );
    expect([...refusal.problems].sort()).toEqual(
      [
        `${refusal.file}: allowlist[1]: "127.1" is not a four-part decimal IPv4 address or range`,
        `${refusal.file}: tls.cert: file ${join(refusal.dir, 'absent.crt')} not found`,
        `${refusal.file}: connector.startSandbox: is only allowed when environment is local`,
        `${refusal.file}: cards.encryptionKey.key: environment variable GW_TEST_NOT_SET is not set`,
        `${refusal.credentialsFile}: credentials[0].passwordHash: must be "scrypt$N$r$p$salt$hash" (use npm run hash-password)`,
      ].sort(),
    );
  });
});

describe('credentials file errors name the credentials file and credentials[i].field', () => {
  it('a password hash that is not a scrypt hash', async () => {
    const credentials = await credentialsWith((entries) => {
      entries[1]!['passwordHash'] = 'correct horse battery staple';
    });
    const refusal = await refuse(await rawTestConfig(), { credentials });
    expect(refusal.problems).toEqual([`${refusal.credentialsFile}: credentials[1].passwordHash: must be "scrypt$N$r$p$salt$hash" (use npm run hash-password)`]);
    // The refused hash text (here a password pasted by mistake) is not echoed.
    expect(refusal.message).not.toContain('correct horse battery staple');
  });

  it('weak scrypt parameters', async () => {
    const credentials = await credentialsWith((entries) => {
      entries[0]!['passwordHash'] = String(entries[0]!['passwordHash']).replace(/^scrypt\$\d+\$/, 'scrypt$16$');
    });
    const refusal = await refuse(await rawTestConfig(), { credentials });
    expect(refusal.problems).toEqual([`${refusal.credentialsFile}: credentials[0].passwordHash: scrypt N must be a power of two of at least 1024`]);
  });

  it('an issuing account the config does not define', async () => {
    const credentials = await credentialsWith((entries) => {
      entries[2]!['issuingAccount'] = 'acct-nowhere';
    });
    const refusal = await refuse(await rawTestConfig(), { credentials });
    expect(refusal.problems).toEqual([`${refusal.credentialsFile}: credentials[2].issuingAccount: "acct-nowhere" is not in the config's issuingAccounts`]);
  });

  it('a duplicate username and a duplicate id', async () => {
    const credentials = await credentialsWith((entries) => {
      entries[3]!['username'] = entries[0]!['username'];
      entries[4]!['id'] = entries[1]!['id'];
    });
    const refusal = await refuse(await rawTestConfig(), { credentials });
    expect(refusal.problems).toEqual([
      `${refusal.credentialsFile}: credentials[3].username: duplicate username`,
      `${refusal.credentialsFile}: credentials[4].id: duplicate id "cred-create"`,
    ]);
  });

  it('a bad address range on a credential', async () => {
    const credentials = await credentialsWith((entries) => {
      entries[4]!['addressRanges'] = ['10.9'];
    });
    const refusal = await refuse(await rawTestConfig(), { credentials });
    expect(refusal.problems).toEqual([`${refusal.credentialsFile}: credentials[4].addressRanges: "10.9" is not a four-part decimal IPv4 address or range`]);
  });

  it('schema problems in the credentials file', async () => {
    const credentials = await credentialsWith((entries) => {
      entries[0]!['permissions'] = ['cards:delete'];
      entries[1]!['active'] = 'yes';
      entries[2]!['role'] = 'admin';
      delete entries[3]!['username'];
    });
    const refusal = await refuse(await rawTestConfig(), { credentials });
    expect([...refusal.problems].sort()).toEqual(
      [
        `${refusal.credentialsFile}: credentials[0].permissions[0]: must be one of ["cards:create","cards:reveal","cards:read","cards:update","events:read"]`,
        `${refusal.credentialsFile}: credentials[1].active: must be boolean`,
        `${refusal.credentialsFile}: credentials[2].role: is not a known setting`,
        `${refusal.credentialsFile}: credentials[3].username: is required`,
      ].sort(),
    );
  });

  it('a credentials file that does not exist', async () => {
    const refusal = await refuse(await rawTestConfig({ credentialsFile: 'elsewhere/credentials.yaml' }));
    expect(refusal.problems).toEqual([`${join(refusal.dir, 'elsewhere', 'credentials.yaml')}: (top level): file not found`]);
  });
});
