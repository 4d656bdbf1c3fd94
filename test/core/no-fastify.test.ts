import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * The core (session and card use cases) runs without Fastify, and so do its tests: neither the
 * use cases nor any file of test/core, with the support it imports, reaches a fastify or
 * @fastify/* module through its imports (static, dynamic and type-only alike). The lint rule
 * sees one file's own imports; this sees what a file drags in through its collaborators.
 */
const REPO = join(import.meta.dirname, '..', '..');

function reachablePackages(entry: string): Set<string> {
  const seen = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string): void => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const { fileName } of ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles) {
      if (fileName.startsWith('.')) visit(resolve(dirname(file), fileName.replace(/\.js$/, '.ts')));
      else packages.add(fileName);
    }
  };
  visit(join(REPO, entry));
  return packages;
}

const isFastify = (name: string): boolean => name === 'fastify' || name.startsWith('fastify/') || name.startsWith('@fastify/');

const coreTests = readdirSync(join(REPO, 'test', 'core'))
  .filter((name) => name.endsWith('.test.ts'))
  .map((name) => `test/core/${name}`);

describe('the core and its tests load without Fastify', () => {
  it('finds the core test files', () => {
    expect(coreTests).toContain('test/core/session-service.test.ts');
    expect(coreTests).toContain('test/core/card-service.test.ts');
  });

  for (const entry of ['src/auth/session-service.ts', 'src/cards/create-card.ts', ...coreTests]) {
    it(`${entry} reaches no fastify or @fastify/* module, directly or through what it imports`, () => {
      const packages = [...reachablePackages(entry)];
      expect(packages.length).toBeGreaterThan(0);
      expect(packages.filter(isFastify)).toEqual([]);
    });
  }

  it('the check sees Fastify where it is: the gateway fixture reaches it', () => {
    expect([...reachablePackages('test/support/gateway-fixture.ts')].filter(isFastify)).toContain('fastify');
  });
});
