import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { markdownAnchors, REPO, repoPath } from './support.js';

/**
 * The operator documentation stands alone (D39): every relative link in deploy/ and
 * docs/runbooks/ resolves to a file of this repository (and a heading, when it names one), and
 * nothing points outside the repository.
 */
function markdownFiles(folder: string): string[] {
  return readdirSync(folder).flatMap((name) => {
    const path = join(folder, name);
    if (statSync(path).isDirectory()) return markdownFiles(path);
    return name.endsWith('.md') ? [path] : [];
  });
}

const files = [...markdownFiles(repoPath('deploy')), ...markdownFiles(repoPath('docs', 'runbooks'))];

/** Inline Markdown links outside code: `[text](target)`. */
function links(text: string): string[] {
  const withoutCode = text.replace(/```[^]*?```/g, '').replace(/`[^`\n]*`/g, '');
  return [...withoutCode.matchAll(/\]\(([^)\s]+)\)/g)].map((match) => match[1] ?? '');
}

describe('operator documentation', () => {
  it('has the runbooks the operators need', () => {
    const names = files.map((file) => relative(REPO, file)).sort();
    for (const wanted of [
      'deploy/README.md',
      'docs/runbooks/README.md',
      'docs/runbooks/alerts.md',
      'docs/runbooks/connector-outage.md',
      'docs/runbooks/credentials.md',
      'docs/runbooks/rotate-card-record-key.md',
      'docs/runbooks/rotate-signing-key.md',
      'docs/runbooks/rotate-tls-certificate.md',
      'docs/runbooks/shutdown-and-rollout.md',
      'docs/runbooks/store-outage.md',
    ]) {
      expect(names).toContain(wanted);
    }
  });

  it('links only to files and headings inside the repository', () => {
    const problems: string[] = [];
    for (const file of files) {
      const text = readFileSync(file, 'utf8');
      if (text.includes('../shared')) problems.push(`${relative(REPO, file)}: mentions ../shared`);
      for (const link of links(text)) {
        if (/^[a-z]+:/.test(link)) continue; // an absolute URL
        const [path = '', anchor] = link.split('#');
        const target = path === '' ? file : resolve(dirname(file), path);
        const where = `${relative(REPO, file)}: ${link}`;
        if (relative(REPO, target).startsWith('..')) {
          problems.push(`${where} leaves the repository`);
          continue;
        }
        if (!existsSync(target)) {
          problems.push(`${where} does not exist`);
          continue;
        }
        if (anchor !== undefined && target.endsWith('.md') && !markdownAnchors(readFileSync(target, 'utf8')).has(anchor)) {
          problems.push(`${where}: no such heading`);
        }
      }
    }
    expect(problems).toEqual([]);
  });
});
