import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Type } from '@sinclair/typebox';
import { describe, expect, it } from 'vitest';
import { ConfigFileSchema } from '../../src/config/config-schema.js';
import { CONFIG_REFERENCE_PATH, renderConfigReference } from '../../src/config/config-reference.js';

/**
 * Issue 18: the configuration reference (docs/configuration.md) is generated from the schemas
 * the loader checks files against, so it cannot drift: the committed file is what
 * `npm run generate:config-docs` writes now, and every setting has a description to print.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const committed = readFileSync(`${ROOT}${CONFIG_REFERENCE_PATH}`, 'utf8');
const generated = renderConfigReference();

/** The rows of every settings table: [setting, type, default, meaning]. */
const rowsOf = (markdown: string): string[][] =>
  markdown
    .split('\n')
    .filter((line) => /^\| `/.test(line))
    .map((line) =>
      line
        .split(/(?<!\\)\|/)
        .slice(1, -1)
        .map((cell) => cell.trim()),
    );

/** Every setting path of a schema, as the reference spells it (`a.b[].c`, `a.<name>.c`). */
function paths(schema: Record<string, unknown>, prefix = ''): string[] {
  const properties = (schema['properties'] ?? {}) as Record<string, Record<string, unknown>>;
  return Object.entries(properties).flatMap(([name, child]) => {
    const path = prefix ? `${prefix}.${name}` : name;
    if (child['maxProperties'] === 1) return [path]; // a secret reference is one setting
    const items = child['items'] as Record<string, unknown> | undefined;
    const pattern = child['patternProperties'] as Record<string, Record<string, unknown>> | undefined;
    if (items?.['maxProperties'] === 1) return [path]; // and so is a list of them
    if (items?.['type'] === 'object') return [path, ...paths(items, `${path}[]`)];
    if (pattern) return [path, ...Object.values(pattern).flatMap((value) => paths(value, `${path}.<name>`))];
    return [path, ...paths(child, path)];
  });
}

describe('docs/configuration.md, the configuration reference', () => {
  it('is what `npm run generate:config-docs` writes from the schemas now (regenerate it when this fails)', () => {
    expect(committed).toBe(generated);
  });

  it('lists every setting of the config file, each with a type, a default and a meaning', () => {
    const rows = rowsOf(generated);
    const listed = rows.map(([setting]) => (setting ?? '').replace(/`/g, ''));
    expect(listed).toEqual(expect.arrayContaining(paths(ConfigFileSchema)));
    for (const [setting, type, byDefault, meaning] of rows) {
      expect(type, setting).not.toBe('');
      expect(byDefault, setting).not.toBe('');
      expect(meaning, `${setting} has no description in its schema`).not.toBe('');
    }
  });

  it('prints the bounds, the default and whether a setting is required, as the schema says', () => {
    const row = (setting: string) => rowsOf(generated).find(([name]) => name === `\`${setting}\``);
    expect(row('store.redis.commandTimeoutMs')?.slice(1, 3)).toEqual(['integer 1 to 5000', '`300`']);
    expect(row('tokens.issuer')?.[2]).toBe('**required**');
    expect(row('store.redis.password')?.slice(1, 3)).toEqual(['secret ref', 'none']);
    expect(row('environment')?.[1]).toBe('one of `local`, `sandbox`, `production`');
    expect(row('credentials[].permissions')?.[1]).toBe('list of one of `cards:create`, `cards:reveal`, `cards:read`, `cards:update`, `events:read`');
  });

  it('prints a list of secret references as one setting, saying what each secret is', () => {
    const rows = rowsOf(generated);
    const secrets = rows.find(([name]) => name === '`events.endpoints[].secrets`');
    expect(secrets?.slice(1, 3)).toEqual(['list of secret ref', '**required**']);
    expect(secrets?.[3]).toMatch(/^each a `whsec_<base64>` signing secret \(Standard Webhooks\), 24 to 64 bytes once decoded; the first signs/);
    expect(rows.filter(([name]) => (name ?? '').startsWith('`events.endpoints[].secrets['))).toEqual([]);
  });

  it('a setting without a description would be caught (guards the check above)', () => {
    const undocumented = Type.Object({ documented: Type.Integer({ description: 'says what it is' }), bare: Type.Integer() });
    expect(paths(undocumented)).toEqual(['documented', 'bare']);
    expect(rowsOf('| `bare` | integer | **required** |  |')[0]?.[3]).toBe('');
  });
});
