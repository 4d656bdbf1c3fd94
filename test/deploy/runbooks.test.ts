import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { STORE_LOG } from '../../src/observability/store-observer.js';
import { STORE_FAILURE_REASONS } from '../../src/store/store-types.js';
import { withoutCodeFences } from '../support/markdown.js';
import { repoPath } from './support.js';

/**
 * The runbooks an operator needs on day two are in the repository. Their links and anchors are
 * checked with every other document's by test/docs/self-contained.test.ts.
 */
describe('operator documentation', () => {
  it('has the runbooks the operators need', () => {
    const missing = [
      'deploy/README.md',
      'docs/runbooks/README.md',
      'docs/runbooks/alerts.md',
      'docs/runbooks/connector-outage.md',
      'docs/runbooks/credentials.md',
      'docs/runbooks/events.md',
      'docs/runbooks/rotate-card-record-key.md',
      'docs/runbooks/rotate-signing-key.md',
      'docs/runbooks/rotate-tls-certificate.md',
      'docs/runbooks/shutdown-and-rollout.md',
      'docs/runbooks/store-outage.md',
      'docs/operations/redis.md',
      'docs/operations/events.md',
    ].filter((path) => !existsSync(repoPath(path)));
    expect(missing).toEqual([]);
  });
});

/**
 * D55: an operator greps the logs for what a runbook quotes, so the runbooks quote the gateway's
 * log texts word for word: the store's from their one definition (STORE_LOG), the others as the
 * code writes them.
 */
describe('the log texts the runbooks quote', () => {
  const storeOutage = withoutCodeFences(readFileSync(repoPath('docs', 'runbooks', 'store-outage.md'), 'utf8'));
  const runbooks = readdirSync(repoPath('docs', 'runbooks'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => ({ name, text: withoutCodeFences(readFileSync(repoPath('docs', 'runbooks', name), 'utf8')) }));

  /** The first cell of each row of the table whose header is `header`, without its backticks. */
  function firstColumn(markdown: string, header: RegExp, column = 0): string[] {
    const lines = markdown.split('\n');
    const start = lines.findIndex((line) => header.test(line));
    if (start < 0) throw new Error(`no table with the header ${String(header)}`);
    const rows: string[] = [];
    for (const line of lines.slice(start + 2)) {
      if (!line.startsWith('|')) break;
      rows.push((line.split('|')[column + 1] ?? '').trim().replace(/^`|`$/g, ''));
    }
    return rows;
  }

  it("lists every store log line of the gateway in docs/runbooks/store-outage.md, and no other", () => {
    expect(firstColumn(storeOutage, /^\| level \| `msg` \| when \|$/, 1).sort()).toEqual(Object.values(STORE_LOG).sort());
  });

  it('names every reason a store failure can have, and no other', () => {
    expect(firstColumn(storeOutage, /^\| reason \| Redis \|/).sort()).toEqual([...STORE_FAILURE_REASONS].sort());
  });

  /** A string literal of the code, or the start of one (a message with a variable end). */
  const sources = readSources(repoPath('src'));
  const written = (text: string): boolean => ["'", '`', '"'].some((quote) => sources.includes(`${quote}${text}`));

  it('quotes no store text the gateway does not write, in any runbook', () => {
    const quoted = runbooks.flatMap(({ name, text }) => [...text.matchAll(/`(store [a-z][^`]*)`/g)].map((match) => ({ name, quoted: match[1] ?? '' })));
    expect(quoted.map(({ quoted: text }) => text)).toEqual(expect.arrayContaining([STORE_LOG.down, STORE_LOG.up]));
    expect(quoted.filter(({ quoted: text }) => !written(text))).toEqual([]);
  });

  it('quotes as logged (`logs X`, `logged X`) only texts the code writes', () => {
    const quoted = runbooks.flatMap(({ name, text }) =>
      [...text.replace(/\s+/g, ' ').matchAll(/\b(?:logs|logged) `([^`$/]+)`/g)].map((match) => ({ name, quoted: match[1] ?? '' })),
    );
    expect(quoted.map(({ quoted: text }) => text)).toEqual(expect.arrayContaining(['stopped', 'configuration reloaded', STORE_LOG.up]));
    expect(quoted.filter(({ quoted: text }) => !written(text))).toEqual([]);
  });
});

function readSources(folder: string): string {
  return readdirSync(folder, { withFileTypes: true })
    .map((entry) => (entry.isDirectory() ? readSources(join(folder, entry.name)) : entry.name.endsWith('.ts') ? readFileSync(join(folder, entry.name), 'utf8') : ''))
    .join('\n');
}
