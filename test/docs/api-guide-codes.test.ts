import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ALL_ERROR_CODES, carriesRetryAfter, ERROR_CATALOGUE, isRetryable } from '../../src/foundation/error-catalogue.js';

/**
 * D36, issue 18: the API guide's table of codes ("Every code") is the catalogue's, row for row:
 * each code once, in catalogue order, with its status, and a retry column that says what the
 * catalogue's retry advice says. The guide words each row for integrators (more than the
 * catalogue's one line), so it is written by hand and checked here rather than generated.
 */

const guide = readFileSync(new URL('../../docs/api-guide.md', import.meta.url), 'utf8');

/** The cells of each row of the first table under `heading`. */
function tableUnder(heading: string): string[][] {
  const lines = guide.split('\n');
  const start = lines.indexOf(heading);
  expect(start, heading).toBeGreaterThanOrEqual(0);
  const rows: string[][] = [];
  for (const line of lines.slice(start + 1)) {
    if (line.startsWith('#')) break;
    if (!line.startsWith('|')) {
      if (rows.length > 0) break;
      continue;
    }
    rows.push(line.split('|').slice(1, -1).map((cell) => cell.trim()));
  }
  return rows.slice(2); // the header row and its separator
}

const codeOf = (cell: string): string => /^`([a-z_]+)`$/.exec(cell)?.[1] ?? cell;

describe('docs/api-guide.md lists the error catalogue', () => {
  const rows = tableUnder('### Every code');

  it('names every code once, in catalogue order, with its status', () => {
    expect(rows.map(([code]) => codeOf(code ?? ''))).toEqual([...ALL_ERROR_CODES]);
    for (const [code, status] of rows) expect(Number(status), code).toBe(ERROR_CATALOGUE[codeOf(code ?? '') as keyof typeof ERROR_CATALOGUE].status);
  });

  it('names no other code, and each with its own status, in any table row that gives a code and a status', () => {
    for (const [, code, status] of guide.matchAll(/^\| `([a-z_]+)` \| (\d{3}) \|/gm)) {
      expect(ALL_ERROR_CODES, code).toContain(code);
      expect(Number(status), code).toBe(ERROR_CATALOGUE[code as keyof typeof ERROR_CATALOGUE].status);
    }
  });

  it("says in each row's retry column what the catalogue's retry advice says", () => {
    for (const row of rows) {
      const code = codeOf(row[0] ?? '') as keyof typeof ERROR_CATALOGUE;
      const retry = row[3] ?? '';
      expect(retry.startsWith('yes'), `${code}: ${retry}`).toBe(isRetryable(code));
      if (carriesRetryAfter(code)) expect(retry, code).toContain('`Retry-After`');
      if (ERROR_CATALOGUE[code].retry.endsWith('same_request_id')) expect(retry, code).toContain('same `requestId`');
    }
  });

  it('lists every retryable code in "Retrying safely"', () => {
    const retrying = tableUnder('## Retrying safely')
      .map(([answer]) => answer ?? '')
      .join(' ');
    for (const code of ALL_ERROR_CODES.filter(isRetryable)) expect(retrying, code).toContain(`\`${code}\``);
  });
});
