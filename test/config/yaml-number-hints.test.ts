import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/config-error.js';
import { loadConfig } from '../../src/config/load-config.js';
import { rawTestConfig, writeTestConfig, type RawConfig } from '../support/gateway-fixture.js';

/**
 * YAML reads an unquoted `10.1`, `10` or `1.5` as a number. Where the config or the credentials
 * file wants a string (an address range, a kid, an id), the refusal says what happened and how
 * to fix it, quoting the text as the file has it (`10.10`, not the number's `10.1`). Anything
 * else that is not a string keeps the plain schema wording.
 */

const scratch: string[] = [];
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

/** Writes `raw`, lets `edit` change the config text (and the credentials text), and returns the refusal's lines. */
async function refusal(
  raw: RawConfig,
  edit: { config?: (text: string) => string; credentials?: (text: string) => string } = {},
): Promise<{ file: string; credentialsFile: string; problems: readonly string[] }> {
  const written = await writeTestConfig(raw);
  scratch.push(written.dir);
  if (edit.config) writeFileSync(written.file, edit.config(readFileSync(written.file, 'utf8')));
  if (edit.credentials) writeFileSync(written.credentialsFile, edit.credentials(readFileSync(written.credentialsFile, 'utf8')));
  const error: unknown = await loadConfig(written.file, {}).then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error, 'the config should be refused').toBeInstanceOf(ConfigError);
  return { file: written.file, credentialsFile: written.credentialsFile, problems: (error as ConfigError).problems };
}

describe('a number where a string is expected', () => {
  it('allowlist and trustedProxies: 10.1, 10 and 1.5, each named by index, beside a bad range checked in the same pass', async () => {
    const { file, problems } = await refusal(await rawTestConfig({ allowlist: ['127.0.0.0/8', 10.1, '127.1'], trustedProxies: [10, 1.5] }));
    expect(problems).toEqual([
      `${file}: trustedProxies[0]: must be a string; YAML read 10 as a number: quote it ("10")`,
      `${file}: trustedProxies[1]: must be a string; YAML read 1.5 as a number: quote it ("1.5")`,
      `${file}: allowlist[1]: must be a string; YAML read 10.1 as a number: quote it ("10.1")`,
      `${file}: allowlist[2]: "127.1" is not a four-part decimal IPv4 address or range`,
    ]);
  });

  it('quotes the text as written: 10.10 is not the number 10.1', async () => {
    const { file, problems } = await refusal(await rawTestConfig({ allowlist: ['127.0.0.0/8', 10.1] }), {
      config: (text) => text.replace(/^( *- )10\.1$/m, '$110.10'),
    });
    expect(problems).toEqual([`${file}: allowlist[1]: must be a string; YAML read 10.10 as a number: quote it ("10.10")`]);
  });

  it('a kid of the signing key and of a card-record key', async () => {
    const raw = await rawTestConfig();
    const { file, problems } = await refusal(raw, {
      config: (text) => text.replace('kid: sbx-1', 'kid: 2024').replace('kid: card-1', 'kid: 1.5'),
    });
    expect(problems).toEqual([
      `${file}: tokens.signingKey.kid: must be a string; YAML read 2024 as a number: quote it ("2024")`,
      `${file}: cards.encryptionKey.kid: must be a string; YAML read 1.5 as a number: quote it ("1.5")`,
    ]);
  });

  it("a credential's id and address ranges, in the credentials file", async () => {
    const { credentialsFile, problems } = await refusal(await rawTestConfig(), {
      credentials: (text) => text.replace('id: cred-full', 'id: 1001').replace('- 10.9.0.0/16', '- 10.9'),
    });
    expect(problems).toEqual([
      `${credentialsFile}: credentials[0].id: must be a string; YAML read 1001 as a number: quote it ("1001")`,
      `${credentialsFile}: credentials[4].addressRanges[0]: must be a string; YAML read 10.9 as a number: quote it ("10.9")`,
    ]);
  });
});

describe('no hint where YAML did not read a number', () => {
  it('a boolean where a string is expected keeps the plain wording', async () => {
    const { file, problems } = await refusal(await rawTestConfig(), { config: (text) => text.replace('kid: sbx-1', 'kid: true') });
    expect(problems).toEqual([`${file}: tokens.signingKey.kid: must be string`]);
  });

  it('a quoted number where an integer is expected is refused without coercion, and without the hint', async () => {
    const { file, problems } = await refusal(await rawTestConfig({ edge: { maxConnections: '10' } }));
    expect(problems).toEqual([`${file}: edge.maxConnections: must be integer`]);
  });
});
