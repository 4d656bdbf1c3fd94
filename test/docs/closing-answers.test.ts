import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CLOSING_CODES } from '../../src/edge/openapi/error-responses.js';
import { ALL_ERROR_CODES } from '../../src/foundation/error-catalogue.js';

/**
 * The API guide's list of answers that close the connection is the code's: the codes it names
 * are the ones the OpenAPI description documents as closing (CLOSING_CODES, which
 * openapi-responses.test.ts holds every real answer to), plus the per-address 429 that closes
 * as the third on one connection; the codes it names as leaving the connection open close none.
 */

const guide = readFileSync(new URL('../../docs/api-guide.md', import.meta.url), 'utf8');
const codesIn = (text: string): string[] => [...text.matchAll(/`([a-z_]+)`/g)].map((match) => match[1]!).filter((code) => (ALL_ERROR_CODES as readonly string[]).includes(code));

describe('docs/api-guide.md: answers that close the connection', () => {
  const start = guide.indexOf('**Answers that close the connection.**');
  const end = guide.indexOf('\n\n', start);
  const paragraph = guide.slice(start, end);
  const [closing = '', open = ''] = paragraph.split('Every other answer');

  it('names exactly the closing codes of the OpenAPI description, and the per-address rate_limited', () => {
    expect(start).toBeGreaterThan(-1);
    expect(codesIn(closing).sort()).toEqual([...CLOSING_CODES, 'rate_limited'].sort());
  });

  it('names as leaving the connection open only codes that do', () => {
    expect(codesIn(open).length).toBeGreaterThan(0);
    for (const code of codesIn(open)) expect(CLOSING_CODES.has(code as never), code).toBe(false);
  });
});
