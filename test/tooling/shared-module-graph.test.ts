import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MOCKING } from '../vitest.config.js';

/**
 * Most test files share their worker's module graph (test/vitest.config.ts, `isolate: false`).
 * A file that replaces a module or a global there would change it for every file after it in
 * the same worker, so such files run in the isolated project; this keeps the list complete.
 */

const REPO = join(import.meta.dirname, '..', '..');
const ROOTS = ['test', 'client/test'];
const THIS_FILE = relative(REPO, import.meta.filename);
/**
 * Calls that replace a module, a global or the environment for the rest of the process (a spy
 * on an object the test built itself is its own and is not one of them).
 */
const REPLACING = /\bvi\.(mock|doMock|stubGlobal|stubEnv)\(|\bvi\.spyOn\((globalThis|process|console|Date|Math|performance|crypto)\b/;

function testFiles(folder: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(join(REPO, folder), { withFileTypes: true })) {
    const path = join(folder, entry.name);
    if (entry.isDirectory() && entry.name !== 'node_modules') found.push(...testFiles(path));
    else if (entry.isFile() && entry.name.endsWith('.ts')) found.push(path);
  }
  return found;
}

describe('the shared module graph of the test workers', () => {
  it('holds no file that replaces a module, a global or the environment', () => {
    const replacing = ROOTS.flatMap(testFiles)
      .filter((file) => file !== THIS_FILE)
      .filter((file) => REPLACING.test(readFileSync(join(REPO, file), 'utf8')));
    expect(replacing.sort()).toEqual([...MOCKING].sort());
  });

  it('would notice one', () => {
    expect(REPLACING.test("vi.mock('../../src/foundation/password-hash.js')")).toBe(true);
    expect(REPLACING.test("vi.stubEnv('NODE_ENV', 'x')")).toBe(true);
    expect(REPLACING.test("vi.spyOn(Date, 'now')")).toBe(true);
    expect(REPLACING.test("vi.spyOn(outcomes, 'record')")).toBe(false);
    expect(REPLACING.test('vi.fn()')).toBe(false);
  });
});
