import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * Issue 18: the README is a front door, not the manual. It stays short, every `npm` command it or
 * the manual names is a script of package.json, and every page of the manual is reachable from it.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');
const readme = read('README.md');
const scripts = new Set(Object.keys((JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts));
/** npm's own commands, and the lifecycle scripts it runs by a short name. */
const NPM_COMMANDS = new Set(['install', 'ci', 'pack', 'start', 'test']);
const manualPages = (folder: string): string[] =>
  readdirSync(join(ROOT, folder), { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? manualPages(`${folder}/${entry.name}`) : entry.name.endsWith('.md') ? [`${folder}/${entry.name}`] : [],
  );
const DOCS = manualPages('docs');

/** `npm run x`, `npm run --silent x`, `npm start`, `npm test`: the script each names. */
function npmScripts(text: string): string[] {
  return [...text.matchAll(/\bnpm (?:run(?: --silent)? ([a-z][\w:-]*)|(start|test)\b)/g)].map((match) => match[1] ?? match[2] ?? '');
}

describe('the README, the front door', () => {
  it('is at most 210 lines', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(210);
  });

  it('names only npm scripts that package.json has, and so does the manual', () => {
    const problems: string[] = [];
    for (const path of ['README.md', ...DOCS]) {
      for (const script of npmScripts(read(path))) {
        if (NPM_COMMANDS.has(script) || scripts.has(script)) continue;
        problems.push(`${path}: npm run ${script} is not a script of package.json`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('keeps the two commands and the first card', () => {
    expect(readme).toContain('npm install && npm start');
    expect(readme).toContain('npm install && npm test');
    expect(scripts.has('start') && scripts.has('test')).toBe(true);
    expect(readme).toContain('/api/v1/auth/login');
    expect(readme).toContain('/api/v1/issuing/cards');
    // The local credential the walk-through logs in with is the one the local config ships.
    expect(read('config/credentials.local.yaml')).toContain('username: demo');
    expect(readme).toContain('"username":"demo","password":"local-demo-password"');
  });

  it('links every page of the manual (directly, or through the runbooks index)', () => {
    const linked = new Set([...readme.matchAll(/\]\((docs\/[^)#\s]+)/g)].map((match) => match[1] ?? ''));
    const missing = DOCS.filter((page) => !page.startsWith('docs/runbooks/') || page === 'docs/runbooks/README.md').filter((page) => !linked.has(page));
    expect(missing).toEqual([]);
  });

  it("leaves the manual's business to the manual: no decision numbers, no test-suite rules", () => {
    expect(readme.match(/\bD\d+[a-z]?\b/g) ?? []).toEqual([]);
    expect(readme.match(/\bspec \d+(\.\d+)*/g) ?? []).toEqual([]);
    for (const rule of ['no-wall-clock', 'toBeLessThan', 'injected clock', 'wall-clock']) expect(readme, rule).not.toContain(rule);
    expect(readme).toContain('](docs/testing.md)');
    expect(readme).toContain('](docs/decisions.md)');
  });

  it('names the licence, which the repository has', () => {
    expect(readme).toContain('](LICENSE)');
    expect(read('LICENSE')).toMatch(/^\s+Apache License\n\s+Version 2\.0, January 2004\n/);
  });

  it('reads the commands the way the checks above need (guards the scanner)', () => {
    expect(npmScripts('npm run lint && npm test; echo x | npm run --silent hash-password; npm run generate:config-docs')).toEqual([
      'lint',
      'test',
      'hash-password',
      'generate:config-docs',
    ]);
  });
});
