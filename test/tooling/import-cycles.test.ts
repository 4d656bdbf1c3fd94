import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

/**
 * `npm run lint` refuses an import cycle (issue 18). The rule only works while ESLint can parse
 * and resolve the files an import leads to; misconfigured, it finds no imports and passes every
 * file. So this shows it firing: config-error.ts, linted as if it imported the module that
 * imports it (read-yaml-file.ts), is a cycle; the file as it is, is not.
 */

const REPO = join(import.meta.dirname, '..', '..');
const FILE = join(REPO, 'src', 'config', 'config-error.ts');

async function cycleMessages(text: string): Promise<string[]> {
  const [result] = await new ESLint({ cwd: REPO }).lintText(text, { filePath: FILE });
  return (result?.messages ?? []).filter((message) => message.ruleId === 'import-x/no-cycle').map((message) => `${message.line}: ${message.message}`);
}

describe('the import-cycle check of npm run lint', () => {
  const source = readFileSync(FILE, 'utf8');

  it('passes src/config/config-error.ts as it is', async () => {
    expect(await cycleMessages(source)).toEqual([]);
  });

  it('refuses it once it imports, at run time, the module that imports it', async () => {
    const cyclic = `import { readYamlFile } from './read-yaml-file.js';\nexport const reader = readYamlFile;\n${source}`;
    expect(await cycleMessages(cyclic)).toEqual(['1: Dependency cycle detected']);
  }, 60_000);
});
