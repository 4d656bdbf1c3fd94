import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtEntryPoints, gatewayCli, REPO } from './support.js';

/**
 * A config with `environment: local` gets the secrets it names generated where it names them,
 * resolved from its own folder like every reference: the shipped config/local.yaml in
 * config/.local/, a copy of it in a .local/ beside the copy, never in `<config folder>/../.local/`.
 * `--check-config` on a fresh local config generates them too (the event secrets with them, D64,
 * D65), and passes.
 */

const NAMES = ['tls.crt', 'tls.key', 'signing.key', 'card-record.key', 'connector-events.secret', 'events-webhook.secret'];
const scratch: string[] = [];

beforeAll(async () => {
  await builtEntryPoints();
}, 180_000);
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

describe('a copy of the local default config', () => {
  it('checks valid on its first --check-config, its secrets generated beside it (0600 in a 0700 folder); a second check generates nothing', async () => {
    const root = mkdtempSync(join(tmpdir(), 'ops-local-'));
    scratch.push(root);
    const copy = join(root, 'elsewhere');
    mkdirSync(copy);
    copyFileSync(join(REPO, 'config', 'local.yaml'), join(copy, 'gateway.yaml'));
    copyFileSync(join(REPO, 'config', 'credentials.local.yaml'), join(copy, 'credentials.local.yaml'));

    const first = await gatewayCli(['--check-config', join(copy, 'gateway.yaml')], { cwd: root });
    expect(first.code, first.stderr).toBe(0);
    const local = join(copy, '.local');
    expect(first.stderr).toBe(
      `local config: generated ${NAMES.map((name) => join('elsewhere', '.local', name)).join(', ')} (keep them out of version control)\n`,
    );
    expect(first.stdout.trim().split('\n').at(-1)).toBe(`${join(copy, 'gateway.yaml')}: valid (environment local, 1 credentials, 2 issuing accounts)`);
    for (const name of NAMES) expect((statSync(join(local, name)).mode & 0o777).toString(8), name).toBe('600');
    expect((statSync(local).mode & 0o777).toString(8)).toBe('700');
    // Not in the folder above the copy, where the old local config pointed.
    expect(existsSync(join(root, '.local'))).toBe(false);

    const second = await gatewayCli(['--check-config', join(copy, 'gateway.yaml')], { cwd: root });
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toBe('');
  }, 120_000);

  it('a sandbox config never gets secrets generated: its missing key is a problem', async () => {
    const root = mkdtempSync(join(tmpdir(), 'ops-local-'));
    scratch.push(root);
    copyFileSync(join(REPO, 'config', 'local.yaml'), join(root, 'gateway.yaml'));
    copyFileSync(join(REPO, 'config', 'credentials.local.yaml'), join(root, 'credentials.local.yaml'));
    writeFileSync(join(root, 'gateway.yaml'), readFileSync(join(root, 'gateway.yaml'), 'utf8').replace('environment: local', 'environment: sandbox'));
    const result = await gatewayCli(['--check-config', join(root, 'gateway.yaml')], { cwd: root });
    expect(result.code).toBe(78);
    expect(result.stderr).toContain(`${join(root, 'gateway.yaml')}: tls.cert: file ${join(root, '.local', 'tls.crt')} not found`);
    expect(existsSync(join(root, '.local'))).toBe(false);
  }, 60_000);
});
