import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { anchorsOf, withoutCodeFences } from '../support/markdown.js';

/**
 * D39: a fresh clone of the repository is self-contained. Nothing a user reads (README, docs,
 * the client's README, the deployment kit's README), nothing an operator runs (config,
 * Dockerfile) and no comment in the code may point outside the repository: no relative path that
 * climbs out of it, no link or file name that a clone does not have, no decision or interface
 * section that docs/decisions.md does not define. The test reads files only; it imports nothing
 * from src/ so that it survives moves of the code.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Generated or installed folders: not part of a clone. */
const NOT_IN_A_CLONE = new Set(['node_modules', '.git', 'dist', '.local', 'coverage']);

function walk(folder: string, found: string[] = []): string[] {
  for (const entry of readdirSync(folder, { withFileTypes: true })) {
    if (NOT_IN_A_CLONE.has(entry.name)) continue;
    const path = join(folder, entry.name);
    if (entry.isDirectory()) walk(path, found);
    else if (entry.isFile()) found.push(path);
  }
  return found;
}

const toRepoPath = (absolute: string): string => relative(ROOT, absolute).split(sep).join('/');
const ALL_FILES = walk(ROOT).map(toRepoPath);
const FILE_NAMES = new Set(ALL_FILES.map((path) => basename(path)));
const inFolder = (folder: string, test: (path: string) => boolean): string[] => ALL_FILES.filter((path) => path.startsWith(`${folder}/`) && test(path));

const MARKDOWN = ['README.md', ...['docs', 'deploy', 'client'].flatMap((folder) => inFolder(folder, (path) => path.endsWith('.md')))];
const CONFIG = inFolder('config', (path) => /^config\/[^/]+\.ya?ml$/.test(path));
const SOURCES = inFolder('src', (path) => path.endsWith('.ts'));
const DOCKERFILE = existsSync(join(ROOT, 'Dockerfile')) ? ['Dockerfile'] : [];
/** Machine-readable docs (the OpenAPI description): checked for references that leave the repository. */
const DOC_DATA = inFolder('docs', (path) => path.endsWith('.json'));
/** The deployment kit: compose, Kubernetes, Prometheus and Grafana files, the secrets script. */
const DEPLOY = inFolder('deploy', (path) => !path.endsWith('.md'));
const SCANNED = [...MARKDOWN, ...CONFIG, ...DOCKERFILE, ...SOURCES, ...DEPLOY];

const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');
const lineOf = (text: string, index: number): number => text.slice(0, index).split('\n').length;

/** True when `absolute` is the repository root or inside it. */
const insideRepo = (absolute: string): boolean => {
  const path = relative(ROOT, absolute);
  return path === '' || (path !== '..' && !path.startsWith(`..${sep}`) && !isAbsolute(path));
};

/** Exists in the repository (a file or a folder), given a path resolved against some folder. */
const existsInRepo = (absolute: string): boolean => insideRepo(absolute) && existsSync(absolute) && !NOT_IN_A_CLONE.has(toRepoPath(absolute).split('/')[0] ?? '');
/** What a local config generates beside itself (config/.local/...): named by the docs, never in a clone. */
const generatedLocally = (path: string): boolean => path.split('/').includes('.local');

/**
 * Every `../` chain followed by a name that, resolved from the file's folder, leaves the
 * repository (import paths stay inside; a pointer to a sibling folder of the checkout does not).
 */
function climbsOut(path: string, text: string): [number, string][] {
  return [...text.matchAll(/(?<![\w.])((?:\.\.\/)+)[\w./-]*[\w-]/g)]
    .filter((match) => !insideRepo(resolve(ROOT, dirname(path), match[1] ?? '')))
    .map((match) => [match.index, match[0]]);
}

const MARKDOWN_LINK = /!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)|^\s*\[[^\]]+\]:\s*(\S+)/gm;

describe('the repository is self-contained (D39)', () => {
  it('finds the files it has to scan', () => {
    expect(MARKDOWN).toContain('README.md');
    expect(MARKDOWN).toEqual(
      expect.arrayContaining(['docs/api-guide.md', 'docs/decisions.md', 'docs/connector-contract.md', 'docs/runbooks/README.md', 'deploy/README.md', 'client/README.md']),
    );
    expect(SOURCES.length).toBeGreaterThan(10);
    expect(CONFIG.length).toBeGreaterThan(0);
  });

  it('no relative path climbs out of the repository, and no development machine path appears', () => {
    const problems: string[] = [];
    for (const path of [...SCANNED, ...DOC_DATA]) {
      const text = read(path);
      for (const [index, climb] of climbsOut(path, text)) problems.push(`${path}:${lineOf(text, index)}: ${climb} is outside the repository`);
      for (const match of text.matchAll(/(?<![\w.-])\/work\/[\w.-]/g)) {
        problems.push(`${path}:${lineOf(text, match.index)}: an absolute path of a development machine: ${match[0]}`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('every Markdown link leads to a file of the repository (and an anchor that exists)', () => {
    const problems: string[] = [];
    for (const path of MARKDOWN) {
      const text = withoutCodeFences(read(path));
      for (const match of text.matchAll(MARKDOWN_LINK)) {
        const target = match[1] ?? match[2] ?? '';
        const where = `${path}:${lineOf(text, match.index)}`;
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) {
          if (!/^(https?|mailto):/i.test(target)) problems.push(`${where}: link with an unexpected scheme: ${target}`);
          continue;
        }
        const [file = '', anchor] = target.split('#', 2);
        if (file.startsWith('/')) {
          problems.push(`${where}: absolute link (write it relative to the file): ${target}`);
          continue;
        }
        const absolute = file === '' ? join(ROOT, path) : resolve(ROOT, dirname(path), decodeURIComponent(file));
        if (!insideRepo(absolute)) {
          problems.push(`${where}: link leaves the repository: ${target}`);
          continue;
        }
        if (!existsInRepo(absolute)) {
          problems.push(`${where}: link to a file the repository does not have: ${target}`);
          continue;
        }
        if (anchor !== undefined && anchor !== '' && absolute.endsWith('.md') && !anchorsOf(readFileSync(absolute, 'utf8')).has(anchor)) {
          problems.push(`${where}: no heading for the anchor #${anchor} in ${toRepoPath(absolute)}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it('every repository path quoted in the docs exists', () => {
    const problems: string[] = [];
    // `src/edge/errors.ts`, `docs/runbooks/`: paths a reader is told to open. Globs and placeholders are not paths.
    const quoted = /`((?:src|docs|config|client|test)\/[^`\s]*)`/g;
    for (const path of MARKDOWN) {
      const text = withoutCodeFences(read(path));
      for (const match of text.matchAll(quoted)) {
        const target = (match[1] ?? '').replace(/[#?].*$/, '');
        if (/[*<>{}$]/.test(target) || generatedLocally(target)) continue;
        if (!existsInRepo(join(ROOT, target))) problems.push(`${path}:${lineOf(text, match.index)}: the repository has no ${target}`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('every document named in the code, the config and the docs is in the repository', () => {
    const problems: string[] = [];
    // A file name such as `pitfalls.md` in a comment sends the reader to a document; a clone must have it.
    const mentioned = /[\w./-]*[\w-]\.md\b/g;
    for (const path of SCANNED) {
      const text = read(path).replace(/\bhttps?:\/\/\S+/g, (url) => ' '.repeat(url.length));
      for (const match of text.matchAll(mentioned)) {
        const name = match[0];
        const found = name.includes('/')
          ? // `/docs/...` after a base URL (the alerts' runbook_url) is a path from the repository's root.
            [resolve(ROOT, dirname(path), name), resolve(ROOT, name.replace(/^\.?\//, ''))].some(existsInRepo)
          : FILE_NAMES.has(name);
        if (!found) problems.push(`${path}:${lineOf(text, match.index)}: names ${name}, which is not in the repository`);
      }
    }
    expect(problems).toEqual([]);
  });

  describe('docs/decisions.md', () => {
    const decisions = read('docs/decisions.md');
    const defined = new Set([...decisions.matchAll(/^\*\*(D\d+a?) /gm)].map((match) => match[1] ?? ''));

    /** Interface sections: numbered headings (`### 4.`, `#### 4.4`) and the numbered points inside a section (`5.7`). */
    const sections = new Set<string>();
    let current: string | undefined;
    for (const line of withoutCodeFences(decisions).split('\n')) {
      const heading = /^#{2,6}\s+(\d+(?:\.\d+)*)\.?\s/.exec(line);
      if (heading?.[1]) {
        current = heading[1];
        sections.add(current);
        continue;
      }
      if (/^#{1,6}\s/.test(line)) current = undefined;
      const point = /^(\d+)\.\s/.exec(line);
      if (point?.[1] && current !== undefined) sections.add(`${current}.${point[1]}`);
    }

    it('defines every decision D1 to D40, and D11a', () => {
      const expected = [...Array.from({ length: 40 }, (_, i) => `D${i + 1}`), 'D11a'];
      expect(expected.filter((id) => !defined.has(id))).toEqual([]);
    });

    it('defines every decision and interface section that the code, the config and the docs cite', () => {
      const problems: string[] = [];
      for (const path of SCANNED) {
        const text = read(path);
        for (const match of text.matchAll(/\bD\d{1,3}[a-z]?\b/g)) {
          if (!defined.has(match[0])) problems.push(`${path}:${lineOf(text, match.index)}: cites ${match[0]}, which docs/decisions.md does not define`);
        }
        for (const match of text.matchAll(/\bspec (\d+(?:\.\d+)*)/gi)) {
          const section = match[1] ?? '';
          if (!sections.has(section)) problems.push(`${path}:${lineOf(text, match.index)}: cites spec ${section}, which the interface summary in docs/decisions.md does not have`);
        }
      }
      expect(problems).toEqual([]);
    });
  });

  it('the Dockerfile copies only what the repository has, and relative credentials files exist', () => {
    const problems: string[] = [];
    for (const path of DOCKERFILE) {
      const text = read(path);
      for (const match of text.matchAll(/^COPY\s+(?!.*--from)(?:--\S+\s+)*(.+)$/gm)) {
        const sources = (match[1] ?? '').trim().split(/\s+/).slice(0, -1);
        for (const source of sources) {
          if (!existsInRepo(join(ROOT, source))) problems.push(`${path}:${lineOf(text, match.index)}: COPY of ${source}, which the repository does not have`);
        }
      }
    }
    for (const path of CONFIG) {
      const text = read(path);
      for (const match of text.matchAll(/^credentialsFile:\s*["']?([^"'\s#]+)/gm)) {
        const file = match[1] ?? '';
        if (file.startsWith('/')) continue; // a deployment path, outside any repository by design
        if (!existsInRepo(resolve(ROOT, dirname(path), file))) problems.push(`${path}:${lineOf(text, match.index)}: credentialsFile ${file} is not in the repository`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('scans real files (guards the scanner itself)', () => {
    expect(statSync(join(ROOT, 'README.md')).isFile()).toBe(true);
    expect(anchorsOf('# A `b` c\n## A `b` c\n### What? Yes: 4.4\n')).toEqual(new Set(['a-b-c', 'a-b-c-1', 'what-yes-44']));
    expect(withoutCodeFences('a\n```\n[x](missing.md)\n```\nb')).toBe('a\n\n\n\nb');
    expect(climbsOut('README.md', 'see ../beside/x.md')).toEqual([[4, '../beside/x.md']]);
    expect(climbsOut('docs/runbooks/a.md', '[b](../../README.md), [c](../../../beside/c.md)')).toEqual([[26, '../../../beside/c.md']]);
    expect(climbsOut('src/edge/a.ts', "import { x } from '../foundation/errors.js';")).toEqual([]);
  });
});
