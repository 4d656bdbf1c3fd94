import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/config-error.js';
import { loadConfig } from '../../src/config/load-config.js';
import { credentialsYaml, DEFAULT_CREDENTIALS, rawTestConfig, testKeys, writeTestConfig, type RawConfig } from '../support/gateway-fixture.js';
import { builtEntryPoints, runToExit } from '../support/process.js';

/**
 * D52: one pass means one pass inside a section too. An unknown or mistyped setting no longer
 * hides the problems of its siblings: a well-formed file reference beside it is still read and
 * parsed, a key still checked, the credentials file still read; and the credentials file's own
 * entries are checked whole even when one of their settings is wrong. The done-when case runs
 * through the compiled entry point (`--check-config`, exit 78).
 */

const scratch: string[] = [];
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

async function problemsOf(raw: RawConfig, credentials?: string): Promise<{ file: string; dir: string; credentialsFile: string; problems: string[] }> {
  const written = await writeTestConfig(raw);
  scratch.push(written.dir);
  if (credentials !== undefined) writeFileSync(written.credentialsFile, credentials);
  const error: unknown = await loadConfig(written.file, {}).then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error, 'the config should be refused').toBeInstanceOf(ConfigError);
  return { file: written.file, dir: written.dir, credentialsFile: written.credentialsFile, problems: [...(error as ConfigError).problems].sort() };
}

/** The default credentials file with `edit` applied to its entries. */
async function credentialsWith(edit: (entries: Record<string, unknown>[]) => void): Promise<string> {
  const parsed = parseYaml(await credentialsYaml(DEFAULT_CREDENTIALS)) as { credentials: Record<string, unknown>[] };
  edit(parsed.credentials);
  return stringify(parsed);
}

describe('--check-config through the entry point (the done-when case of D52)', () => {
  let mainJs: string;
  beforeAll(async () => {
    mainJs = (await builtEntryPoints()).mainJs;
  }, 180_000);

  it('an unknown tls setting, a missing certificate, a numeric kid and a missing signing key: all four, with the credentials file, exit 78', async () => {
    const keys = await testKeys();
    const raw = await rawTestConfig({
      tls: { cert: { file: 'missing.crt' }, key: { file: keys.tlsKey }, minVersion: 5 },
      tokens: { signingKey: { kid: 7, privateKey: { file: 'missing-signing.key' } } },
    });
    const credentials = await credentialsWith((entries) => {
      entries[0]!['passwordHash'] = 'not-a-hash';
    });
    const { file, dir, credentialsFile } = await writeTestConfig(raw).then((written) => {
      scratch.push(written.dir);
      writeFileSync(written.credentialsFile, credentials);
      return written;
    });

    const result = await runToExit(process.execPath, [mainJs, '--check-config', file]);
    expect(result.code, result.stderr).toBe(78);
    expect(result.stdout).toBe('');
    const lines = result.stderr.split('\n').filter((line) => line !== '');
    expect(lines[0]).toBe('Invalid configuration:');
    expect(lines.slice(1).map((line) => line.trim())).toEqual([
      // the schema's, first
      `${file}: tls.minVersion: is not a known setting`,
      `${file}: tokens.signingKey.kid: must be a string; YAML read 7 as a number: quote it ("7")`,
      // then each section's, the well-formed references beside them read
      `${file}: tls.cert: file ${join(dir, 'missing.crt')} not found`,
      `${file}: tokens.signingKey.privateKey: file ${join(dir, 'missing-signing.key')} not found`,
      // and the credentials file's
      `${credentialsFile}: credentials[0].passwordHash: must be "scrypt$N$r$p$salt$hash" (use npm run hash-password)`,
    ]);
  });
});

describe('a schema problem in a section does not hide the rest of that section', () => {
  it('tls: an unknown setting beside a certificate that is not one and a key that is not one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'one-pass-tls-'));
    scratch.push(dir);
    writeFileSync(join(dir, 'tls.crt'), 'no certificate\n');
    writeFileSync(join(dir, 'tls.key'), 'no key\n', { mode: 0o600 });
    const { file, problems } = await problemsOf(
      await rawTestConfig({ tls: { cert: { file: join(dir, 'tls.crt') }, key: { file: join(dir, 'tls.key') }, minVersion: 5 } }),
    );
    expect(problems).toEqual(
      [`${file}: tls.minVersion: is not a known setting`, `${file}: tls.cert: is not a PEM certificate`, `${file}: tls.key: is not a PEM private key`].sort(),
    );
  });

  it('tls: an unknown setting beside a good certificate and key is the one problem', async () => {
    const keys = await testKeys();
    const { file, problems } = await problemsOf(await rawTestConfig({ tls: { cert: { file: keys.tlsCert }, key: { file: keys.tlsKey }, minVersion: 5 } }));
    expect(problems).toEqual([`${file}: tls.minVersion: is not a known setting`]);
  });

  it('tokens: a mistyped verification kid beside a key of the wrong kind, and a duplicate kid', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'one-pass-tokens-'));
    scratch.push(dir);
    const p256 = join(dir, 'p256.pub');
    writeFileSync(p256, generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'pem' }));
    const keys = await testKeys();
    const { file, problems } = await problemsOf(
      await rawTestConfig({
        tokens: {
          audience: 42,
          signingKey: { kid: 'k1', privateKey: { file: keys.signingKey } },
          verificationKeys: [
            { kid: '', publicKey: { file: p256 } },
            { kid: 'k1', publicKey: { file: keys.otherPublicKey } },
          ],
        },
      }),
    );
    expect(problems).toEqual(
      [
        `${file}: tokens.audience: must be a string; YAML read 42 as a number: quote it ("42")`,
        `${file}: tokens.verificationKeys[0].kid: must NOT have fewer than 1 characters`,
        `${file}: tokens.verificationKeys[0].publicKey: is a ec key, but tokens.algorithm EdDSA needs an Ed25519 key`,
        `${file}: tokens.verificationKeys[1].kid: duplicate kid "k1"`,
      ].sort(),
    );
  });

  it('cards: a kid the schema refuses beside a key of the wrong length', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'one-pass-cards-'));
    scratch.push(dir);
    writeFileSync(join(dir, 'short.key'), randomBytes(16).toString('base64'), { mode: 0o600 });
    const { file, problems } = await problemsOf(await rawTestConfig({ cards: { encryptionKey: { kid: 'card 1', key: { file: join(dir, 'short.key') } } } }));
    expect(problems).toEqual(
      [
        `${file}: cards.encryptionKey.kid: must match pattern "^[A-Za-z0-9_-]{1,64}$"`,
        `${file}: cards.encryptionKey.key: must be 32 bytes, written as 64 hex digits or base64 (AES-256-GCM, D18)`,
      ].sort(),
    );
  });

  it('connector: an unknown setting beside a CA that is not one and the sandbox outside local', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'one-pass-connector-'));
    scratch.push(dir);
    writeFileSync(join(dir, 'ca.crt'), 'no CA\n');
    const { file, problems } = await problemsOf(
      await rawTestConfig({ connector: { url: 'http://127.0.0.1:9700', startSandbox: true, retries: 3, tls: { ca: { file: join(dir, 'ca.crt') } } } }),
    );
    expect(problems).toEqual(
      [
        `${file}: connector.retries: is not a known setting`,
        `${file}: connector.tls.ca: is not a PEM certificate`,
        `${file}: connector.tls: needs an https:// connector.url`,
        `${file}: connector.startSandbox: is only allowed when environment is local`,
      ].sort(),
    );
  });

  it('store.redis: a timeout out of range beside a missing password file and a node whose port is none', async () => {
    const { file, dir, problems } = await problemsOf(
      await rawTestConfig({
        store: { kind: 'redis', redis: { cluster: { nodes: ['redis-0:70000'] }, password: { file: 'absent.password' }, keyPrefix: 'p:', commandTimeoutMs: 0 } },
      }),
    );
    expect(problems).toEqual(
      [
        `${file}: store.redis.commandTimeoutMs: must be >= 1`,
        `${file}: store.redis.cluster.nodes[0]: "redis-0:70000" is not host:port with a port from 1 to 65535`,
        `${file}: store.redis.password: file ${join(dir, 'absent.password')} not found`,
      ].sort(),
    );
  });

  it('production guards still run beside a broken section: an unknown connector setting does not hide plain http://', async () => {
    const { file, problems } = await problemsOf(
      await rawTestConfig({ environment: 'production', store: { kind: 'memory', size: 1 }, connector: { url: 'http://127.0.0.1:9', retries: 3 } }),
    );
    expect(problems).toEqual(
      [
        `${file}: store.size: is not a known setting`,
        `${file}: connector.retries: is not a known setting`,
        `${file}: store.kind: memory keeps state in one process only; use redis (production refuses unsafe settings)`,
        `${file}: connector.url: plain http:// would send PAN and CVC in clear text; use https:// (production refuses unsafe settings)`,
      ].sort(),
    );
  });
});

describe("the credentials file's problems come with the config's, every entry checked whole", () => {
  it('an unknown setting on a credential does not hide its bad hash, nor another entry its bad range', async () => {
    const credentials = await credentialsWith((entries) => {
      entries[0]!['role'] = 'admin';
      entries[0]!['passwordHash'] = 'plaintext';
      entries[1]!['active'] = 'yes';
      entries[1]!['addressRanges'] = ['10.0.0.0/33'];
      entries[2]!['id'] = 'cred-full';
    });
    const { credentialsFile, problems } = await problemsOf(await rawTestConfig(), credentials);
    expect(problems).toEqual(
      [
        `${credentialsFile}: credentials[0].role: is not a known setting`,
        `${credentialsFile}: credentials[0].passwordHash: must be "scrypt$N$r$p$salt$hash" (use npm run hash-password)`,
        `${credentialsFile}: credentials[1].active: must be boolean`,
        `${credentialsFile}: credentials[1].addressRanges: "10.0.0.0/33" has an invalid prefix length`,
        `${credentialsFile}: credentials[2].id: duplicate id "cred-full"`,
      ].sort(),
    );
  });

  it("a currency the schema refuses does not stop the credentials' accounts being checked against the accounts named", async () => {
    const credentials = await credentialsWith((entries) => {
      entries[3]!['issuingAccount'] = 'acct-nowhere';
    });
    const { file, credentialsFile, problems } = await problemsOf(
      await rawTestConfig({ issuingAccounts: { 'acct-eu': { currencies: ['eur'] }, 'acct-uk': { currencies: ['GBP'] } } }),
      credentials,
    );
    expect(problems).toEqual(
      [
        `${file}: issuingAccounts.acct-eu.currencies[0]: must match pattern "^[A-Z]{3}$"`,
        `${credentialsFile}: credentials[3].issuingAccount: "acct-nowhere" is not in the config's issuingAccounts`,
      ].sort(),
    );
  });
});
