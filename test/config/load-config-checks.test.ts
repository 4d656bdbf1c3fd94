import { generateKeyPairSync, X509Certificate } from 'node:crypto';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import selfsigned from 'selfsigned';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigFileSchema } from '../../src/config/config-schema.js';
import { ConfigError } from '../../src/config/config-error.js';
import { RELOADABLE_SECTIONS } from '../../src/config/live-settings.js';
import { loadConfig, type Environment, type GatewayConfig } from '../../src/config/load-config.js';
import { restartNeeded } from '../../src/config/restart-only.js';
import { rawTestConfig, testKeys, writeTestConfig, type RawConfig } from '../support/gateway-fixture.js';

/**
 * What the loader checks beyond the schema, so that `--check-config` says "valid" only for a
 * config that starts (D40): TLS certificates and keys parse and belong together, a misspelled
 * top-level key does not hide the other sections' problems, the in-process sandbox connector is
 * not promised over https://; and the reload bookkeeping (D22): a secret rotated in place is a
 * change of its section, and the reloadable sections are written once.
 */

const scratch: string[] = [];
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'gw-config-checks-'));
  scratch.push(dir);
  return dir;
}

/** A self-signed certificate and its key, as PEM. */
async function certificate(commonName = 'localhost'): Promise<{ cert: string; key: string }> {
  const pems = await selfsigned.generate([{ name: 'commonName', value: commonName }], { keyType: 'ec', curve: 'P-256', algorithm: 'sha256' });
  return { cert: pems.cert, key: pems.private };
}

/** Writes `content` into a fresh file (mode 0600) and returns its path. */
function secretFile(name: string, content: string): string {
  const path = join(tempDir(), name);
  writeFileSync(path, content, { mode: 0o600 });
  return path;
}

async function problemsOf(raw: RawConfig, env: Environment = {}): Promise<{ file: string; problems: readonly string[] }> {
  const written = await writeTestConfig(raw);
  scratch.push(written.dir);
  const error: unknown = await loadConfig(written.file, env).then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error, 'the config should be refused').toBeInstanceOf(ConfigError);
  return { file: written.file, problems: (error as ConfigError).problems };
}

describe('TLS certificates and keys are parsed when the config loads', () => {
  it('a tls.cert that is not a certificate', async () => {
    const keys = await testKeys();
    const garbage = secretFile('tls.crt', 'this is not a certificate\n');
    const { file, problems } = await problemsOf(await rawTestConfig({ tls: { cert: { file: garbage }, key: { file: keys.tlsKey } } }));
    expect(problems).toEqual([`${file}: tls.cert: is not a PEM certificate`]);
  });

  it('a tls.cert whose PEM block does not parse', async () => {
    const keys = await testKeys();
    const broken = secretFile('tls.crt', '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
    const { file, problems } = await problemsOf(await rawTestConfig({ tls: { cert: { file: broken }, key: { file: keys.tlsKey } } }));
    expect(problems).toEqual([`${file}: tls.cert: certificate 1 of the file does not parse`]);
  });

  it('a tls.key that is not a private key', async () => {
    const keys = await testKeys();
    const garbage = secretFile('tls.key', 'not a key\n');
    const { file, problems } = await problemsOf(await rawTestConfig({ tls: { cert: { file: keys.tlsCert }, key: { file: garbage } } }));
    expect(problems).toEqual([`${file}: tls.key: is not a PEM private key`]);
  });

  it('a tls.key that does not belong to tls.cert', async () => {
    const keys = await testKeys();
    const other = secretFile('other.key', (await certificate()).key);
    const { file, problems } = await problemsOf(await rawTestConfig({ tls: { cert: { file: keys.tlsCert }, key: { file: other } } }));
    expect(problems).toEqual([`${file}: tls.key: does not match the certificate in tls.cert`]);
  });

  it('TLS problems come in the same pass as the other sections', async () => {
    const keys = await testKeys();
    const other = secretFile('other.key', generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString());
    const { file, problems } = await problemsOf(
      await rawTestConfig({ tls: { cert: { file: keys.tlsCert }, key: { file: other } }, allowlist: ['127.1'], tokens: { audience: '' } }),
    );
    expect([...problems].sort()).toEqual(
      [
        `${file}: tokens.audience: must NOT have fewer than 1 characters`,
        `${file}: allowlist[0]: "127.1" is not a four-part decimal IPv4 address or range`,
        `${file}: tls.key: does not match the certificate in tls.cert`,
      ].sort(),
    );
  });

  it("the connector's client certificate and key are parsed and must match; its CA must parse", async () => {
    const client = await certificate('card-gateway');
    const stranger = await certificate('stranger');
    const { file, problems } = await problemsOf(
      await rawTestConfig({
        connector: {
          url: 'https://127.0.0.1:9',
          tls: {
            ca: { file: secretFile('ca.crt', 'no CA here\n') },
            cert: { file: secretFile('client.crt', client.cert) },
            key: { file: secretFile('client.key', stranger.key) },
          },
        },
      }),
    );
    expect(problems).toEqual([
      `${file}: connector.tls.ca: is not a PEM certificate`,
      `${file}: connector.tls.key: does not match the certificate in connector.tls.cert`,
    ]);
  });

  it('a connector client certificate or key that does not parse', async () => {
    const client = await certificate('card-gateway');
    const { file, problems } = await problemsOf(
      await rawTestConfig({
        connector: {
          url: 'https://127.0.0.1:9',
          tls: { cert: { file: secretFile('client.crt', client.key) }, key: { file: secretFile('client.key', client.cert) } },
        },
      }),
    );
    expect(problems).toEqual([`${file}: connector.tls.cert: is not a PEM certificate`, `${file}: connector.tls.key: is not a PEM private key`]);
  });

  it('a valid pair loads, and the certificate expiry is kept for the metrics', async () => {
    const keys = await testKeys();
    const client = await certificate('card-gateway');
    const written = await writeTestConfig(
      await rawTestConfig({
        connector: {
          url: 'https://127.0.0.1:9',
          tls: { ca: { file: keys.tlsCert }, cert: { file: secretFile('client.crt', client.cert) }, key: { file: secretFile('client.key', client.key) } },
        },
      }),
    );
    scratch.push(written.dir);
    const config = await loadConfig(written.file, {});
    const expected = Math.floor(Date.parse(new X509Certificate(config.tls.cert).validTo) / 1000);
    expect(config.tls.certificateExpiresAt).toBe(expected);
  });
});

describe('a misspelled top-level key', () => {
  it('is reported with the problems of every other section, in one pass', async () => {
    const raw = await rawTestConfig({ tokens: { signingKey: { kid: 'k1', privateKey: { file: 'absent-signing.key' } } } });
    raw['alowlist'] = raw['allowlist'];
    delete raw['allowlist'];
    const { file, problems } = await problemsOf(raw);
    expect([...problems].sort()).toEqual(
      [
        `${file}: alowlist: is not a known setting`,
        `${file}: allowlist: is required`,
        `${file}: tokens.signingKey.privateKey: file ${join(file, '..', 'absent-signing.key')} not found`,
      ].sort(),
    );
  });

  it('an unknown key beside an otherwise valid config is the only problem', async () => {
    const raw = await rawTestConfig({ bogus: 1 });
    const { file, problems } = await problemsOf(raw);
    expect(problems).toEqual([`${file}: bogus: is not a known setting`]);
  });
});

describe('the in-process sandbox connector', () => {
  it('is refused on an https:// connector.url (it speaks plain http)', async () => {
    const { file, problems } = await problemsOf(
      await rawTestConfig({ environment: 'local', connector: { url: 'https://127.0.0.1:9700', startSandbox: true } }),
    );
    expect(problems).toEqual([
      `${file}: connector.url: the in-process sandbox connector (connector.startSandbox) listens on plain http://; use an http:// url with it`,
    ]);
  });

  it('is accepted on an http:// connector.url', async () => {
    const written = await writeTestConfig(await rawTestConfig({ environment: 'local', connector: { url: 'http://127.0.0.1:9700', startSandbox: true } }));
    scratch.push(written.dir);
    const config = await loadConfig(written.file, {});
    expect(config.connector).toMatchObject({ url: 'http://127.0.0.1:9700', startSandbox: true });
  });
});

describe('reload bookkeeping', () => {
  /** A config whose TLS files live in its own folder, so a test can rewrite them in place. */
  async function ownTlsConfig(): Promise<{ file: string; dir: string; load(): Promise<GatewayConfig> }> {
    const keys = await testKeys();
    const written = await writeTestConfig(await rawTestConfig({ tls: { cert: { file: 'tls.crt' }, key: { file: 'tls.key' } } }));
    scratch.push(written.dir);
    copyFileSync(keys.tlsCert, join(written.dir, 'tls.crt'));
    copyFileSync(keys.tlsKey, join(written.dir, 'tls.key'));
    return { file: written.file, dir: written.dir, load: () => loadConfig(written.file, {}) };
  }

  it('a TLS certificate and key rotated in place (same paths) is a change only a restart applies', async () => {
    const config = await ownTlsConfig();
    const running = await config.load();
    expect(restartNeeded(running, await config.load())).toEqual([]);
    const next = await certificate('rotated.example');
    writeFileSync(join(config.dir, 'tls.crt'), next.cert);
    writeFileSync(join(config.dir, 'tls.key'), next.key, { mode: 0o600 });
    expect(restartNeeded(running, await config.load())).toEqual(['tls']);
  });

  it('a card-record key rotated in place is named too', async () => {
    const written = await writeTestConfig(await rawTestConfig({ cards: { encryptionKey: { kid: 'card-1', key: { file: 'card.key' } } } }));
    scratch.push(written.dir);
    writeFileSync(join(written.dir, 'card.key'), 'a'.repeat(64), { mode: 0o600 });
    const running = await loadConfig(written.file, {});
    writeFileSync(join(written.dir, 'card.key'), 'b'.repeat(64), { mode: 0o600 });
    expect(restartNeeded(running, await loadConfig(written.file, {}))).toEqual(['cards']);
  });

  it('every top-level section is either reloadable or restart-only, never both', async () => {
    const written = await writeTestConfig(await rawTestConfig());
    scratch.push(written.dir);
    const config = await loadConfig(written.file, {});
    const restartOnly = Object.keys(config.restartOnly);
    for (const section of RELOADABLE_SECTIONS) expect(restartOnly).not.toContain(section);
    expect([...restartOnly, ...RELOADABLE_SECTIONS].sort()).toEqual(Object.keys(ConfigFileSchema.properties).sort());
  });
});
