import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/config-error.js';
import { loadConfig } from '../../src/config/load-config.js';
import { SHIPPED_PASSWORD_HASHES } from '../../src/config/shipped-credentials.js';
import { productionSafeOverrides, rawTestConfig, writeTestConfig, type RawConfig, type WrittenConfig } from '../support/gateway-fixture.js';
import { builtEntryPoints, gatewayCli, REPO } from '../operations/support.js';

/**
 * D62: no open door in production. `environment: production` refuses to start (and
 * `--check-config` refuses) an allowlist entry of prefix length 0 or wider than a /8 / a /32
 * without `allowlistWideRangesAllowed: true`, a trusted proxy range of prefix length 0, a
 * credential whose password hash is the one the repository ships, and an admin listener on a
 * non-loopback address without `listeners.admin.exposed: true`; each as `file: field: problem`.
 * Sandbox starts and warns about each. The boundaries are tested on both sides.
 */

type Environment = 'production' | 'sandbox' | 'local';
const REASON = ' (production refuses unsafe settings)';
const written: WrittenConfig[] = [];
afterAll(() => {
  for (const { dir } of written) rmSync(dir, { recursive: true, force: true });
});

/** A config that production accepts (D32, D50), with `overrides`; the second credential given the demo hash when asked. */
async function write(environment: Environment, overrides: RawConfig = {}, demoHash = false): Promise<WrittenConfig> {
  const config = await writeTestConfig(await rawTestConfig({ ...(await productionSafeOverrides()), environment, ...overrides }));
  written.push(config);
  if (demoHash) {
    const credentials = parse(readFileSync(config.credentialsFile, 'utf8')) as { credentials: Record<string, unknown>[] };
    credentials.credentials[1]!['passwordHash'] = SHIPPED_PASSWORD_HASHES[0];
    writeFileSync(config.credentialsFile, stringify(credentials));
  }
  return config;
}

async function check(environment: Environment, overrides: RawConfig = {}, demoHash = false) {
  const config = await write(environment, overrides, demoHash);
  try {
    const loaded = await loadConfig(config.file, {});
    // The fixture's Redis has no TLS (a warning of D50's, not of these).
    return { ...config, problems: [] as string[], warnings: loaded.warnings.filter((line) => !line.includes(': store.redis.tls: ')) };
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return { ...config, problems: error.problems, warnings: [] as string[] };
  }
}

/** `field` of each line, as `file: field: problem` names it. */
const fields = (lines: readonly string[], file: string): string[] => lines.map((line) => line.slice(file.length + 2).split(': ')[0] ?? '');

describe('the allowlist (D62)', () => {
  it('production refuses prefix length 0 in either family, even with allowlistWideRangesAllowed', async () => {
    for (const allowed of [false, true]) {
      const result = await check('production', { allowlist: ['203.0.113.0/24', '0.0.0.0/0', '::/0'], allowlistWideRangesAllowed: allowed });
      expect(result.problems).toEqual([
        `${result.file}: allowlist[1]: "0.0.0.0/0" admits every address: an allowlist of everything is none; list the clients' ranges${REASON}`,
        `${result.file}: allowlist[2]: "::/0" admits every address: an allowlist of everything is none; list the clients' ranges${REASON}`,
      ]);
    }
  });

  it('production takes a /8 and a /32, refuses a /7 and a /31 (an IPv4-mapped range judged as IPv4), and takes them with allowlistWideRangesAllowed', async () => {
    expect((await check('production', { allowlist: ['10.0.0.0/8', '2001:db8::/32', '::ffff:10.0.0.0/104'] })).problems).toEqual([]);
    const wide = await check('production', { allowlist: ['10.0.0.0/7', '2001:db8::/31', '::ffff:10.0.0.0/103'] });
    expect(fields(wide.problems, wide.file)).toEqual(['allowlist[0]', 'allowlist[1]', 'allowlist[2]']);
    expect(wide.problems[0]).toBe(
      `${wide.file}: allowlist[0]: "10.0.0.0/7" is wider than a /8; list the clients' own ranges, or set allowlistWideRangesAllowed: true if a partner's network really is that large${REASON}`,
    );
    expect(wide.problems[1]).toContain('"2001:db8::/31" is wider than a /32');
    const allowed = await check('production', { allowlist: ['10.0.0.0/7', '2001:db8::/31'], allowlistWideRangesAllowed: true });
    expect(allowed).toMatchObject({ problems: [], warnings: [] });
  });

  it('sandbox starts with them and warns about each', async () => {
    const result = await check('sandbox', { allowlist: ['0.0.0.0/0', '10.0.0.0/7'] });
    expect(result.problems).toEqual([]);
    expect(fields(result.warnings, result.file)).toEqual(['allowlist[0]', 'allowlist[1]']);
  });
});

describe('trusted proxies (D62)', () => {
  it('production refuses a range of prefix length 0 and takes a /1; sandbox warns', async () => {
    const result = await check('production', { trustedProxies: ['10.20.0.0/16', '::/0', '0.0.0.0/0'] });
    expect(fields(result.problems, result.file)).toEqual(['trustedProxies[1]', 'trustedProxies[2]']);
    expect(result.problems[1]).toBe(
      `${result.file}: trustedProxies[2]: "0.0.0.0/0" trusts every peer: any client could name any address in X-Forwarded-For and pass the allowlist; list the load balancers' ranges${REASON}`,
    );
    expect((await check('production', { trustedProxies: ['0.0.0.0/1'] })).problems).toEqual([]);
    const sandbox = await check('sandbox', { trustedProxies: ['0.0.0.0/0'] });
    expect(sandbox.problems).toEqual([]);
    expect(fields(sandbox.warnings, sandbox.file)).toEqual(['trustedProxies[0]']);
  });
});

describe('the admin listener (D62)', () => {
  const admin = (host: string, exposed?: boolean) => ({
    listeners: { https: { host: '127.0.0.1', port: 0 }, admin: { host, port: 0, ...(exposed !== undefined && { exposed }) } },
  });

  it('production takes loopback addresses and refuses any other without listeners.admin.exposed', async () => {
    for (const host of ['127.0.0.1', '127.0.0.2', '::1', 'localhost']) expect((await check('production', admin(host))).problems, host).toEqual([]);
    for (const host of ['0.0.0.0', '::', '10.1.2.3', 'admin-listener']) {
      const result = await check('production', admin(host));
      expect(result.problems, host).toEqual([
        `${result.file}: listeners.admin.host: the admin listener on ${host} serves /metrics, /healthz, /readyz and /openapi.json without authentication to whoever reaches that address; bind it to 127.0.0.1, or set listeners.admin.exposed: true where a network policy keeps it internal${REASON}`,
      ]);
    }
  });

  it('with exposed: true, production starts and warns, naming the exposure; on loopback exposed says nothing', async () => {
    const result = await check('production', admin('0.0.0.0', true));
    expect(result.problems).toEqual([]);
    expect(result.warnings).toEqual([
      `${result.file}: listeners.admin.host: the admin listener on 0.0.0.0 serves /metrics, /healthz, /readyz and /openapi.json without authentication to whoever reaches that address (listeners.admin.exposed: true); keep it on a network only the scraper and the probes reach`,
    ]);
    expect((await check('production', admin('127.0.0.1', true))).warnings).toEqual([]);
  });

  it('sandbox warns without exposed', async () => {
    const result = await check('sandbox', admin('0.0.0.0'));
    expect(result.problems).toEqual([]);
    expect(fields(result.warnings, result.file)).toEqual(['listeners.admin.host']);
  });
});

describe("the repository's demo credential (D62)", () => {
  it('production refuses a credential with the shipped hash, naming the credentials file and the entry; another hash is taken', async () => {
    const result = await check('production', {}, true);
    expect(result.problems).toEqual([
      `${result.credentialsFile}: credentials[1].passwordHash: is the demo credential's hash shipped in the repository (config/credentials.local.yaml), whose password anyone can read there; make a new one with npm run hash-password${REASON}`,
    ]);
    expect((await check('production')).problems).toEqual([]);
  });

  it('sandbox warns; local, which the demo credential is for, says nothing', async () => {
    const sandbox = await check('sandbox', {}, true);
    expect(sandbox.problems).toEqual([]);
    expect(sandbox.warnings.filter((line) => line.startsWith(sandbox.credentialsFile))).toEqual([
      `${sandbox.credentialsFile}: credentials[1].passwordHash: is the demo credential's hash shipped in the repository (config/credentials.local.yaml), whose password anyone can read there; make a new one with npm run hash-password`,
    ]);
    const local = await check('local', {}, true);
    expect(local.problems).toEqual([]);
    expect(local.warnings.filter((line) => line.startsWith(local.credentialsFile))).toEqual([]);
  });

  it("the list in code is every password hash in the repository's config and deploy files", () => {
    const found = new Set<string>();
    const walk = (dir: string): void => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) walk(path);
        else if (/\.(ya?ml|sh)$/.test(entry.name)) {
          for (const match of readFileSync(path, 'utf8').matchAll(/passwordHash:\s*"?(scrypt\$[^"\s]+)/g)) if (!match[1]!.includes('<')) found.add(match[1]!);
        }
      }
    };
    walk(join(REPO, 'config'));
    walk(join(REPO, 'deploy'));
    expect([...found].sort()).toEqual([...SHIPPED_PASSWORD_HASHES].sort());
  });
});

describe('start and --check-config, as processes', () => {
  beforeAll(async () => {
    await builtEntryPoints();
  }, 180_000);

  const OPEN_DOORS = {
    allowlist: ['0.0.0.0/0'],
    trustedProxies: ['::/0'],
    listeners: { https: { host: '127.0.0.1', port: 0 }, admin: { host: '0.0.0.0', port: 0 } },
  };

  it('production: --check-config and --config exit 78 with one file: field: problem line per open door, and bind nothing', async () => {
    const config = await write('production', OPEN_DOORS, true);
    const expected = [
      `${config.file}: allowlist[0]: `,
      `${config.file}: trustedProxies[0]: `,
      `${config.file}: listeners.admin.host: `,
      `${config.credentialsFile}: credentials[1].passwordHash: `,
    ];
    for (const option of ['--check-config', '--config']) {
      const result = await gatewayCli([option, config.file]);
      expect(result.code, `${option}: ${result.stderr}`).toBe(78);
      expect(result.stdout).not.toContain('gateway listening');
      const lines = result.stderr.split('\n').map((line) => line.trim());
      for (const start of expected)
        expect(
          lines.filter((line) => line.startsWith(start)),
          `${option}: ${start}`,
        ).toHaveLength(1);
    }
  }, 120_000);

  it('sandbox: --check-config is valid and prints a warning for each', async () => {
    const config = await write('sandbox', OPEN_DOORS, true);
    const result = await gatewayCli(['--check-config', config.file]);
    expect(result.code, result.stderr).toBe(0);
    const warnings = result.stdout.split('\n').filter((line) => line.startsWith('warning: '));
    for (const start of [
      `${config.file}: allowlist[0]: `,
      `${config.file}: trustedProxies[0]: `,
      `${config.file}: listeners.admin.host: `,
      `${config.credentialsFile}: credentials[1].passwordHash: `,
    ])
      expect(
        warnings.filter((line) => line.startsWith(`warning: ${start}`)),
        start,
      ).toHaveLength(1);
  }, 60_000);
});
