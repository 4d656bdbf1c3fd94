import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { retryableAnswer } from '../../client/src/answer.js';
import { GATEWAY_RETRY_ADVICE } from '../../client/src/error-codes.js';
import { GATEWAY_ERROR_CODES, RETRYABLE_STATUSES } from '../../client/src/index.js';
import { CLIENT_ERROR_CODES_PATH, renderClientErrorCodes } from '../../src/foundation/client-error-codes.js';
import { ALL_ERROR_CODES, ERROR_CATALOGUE, ERROR_CODES, isRetryable } from '../../src/foundation/error-catalogue.js';

/**
 * Issue 18: the client's code table is generated from the gateway's error catalogue, so it
 * cannot drift: the committed file is what the generator writes now, and the client, which has
 * no build dependency on the gateway, imports nothing from outside client/.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLIENT_SRC = join(ROOT, 'client', 'src');

function typescriptFiles(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? typescriptFiles(join(folder, entry.name)) : entry.name.endsWith('.ts') ? [join(folder, entry.name)] : [],
  );
}

describe("the client's error-code table (client/src/error-codes.ts)", () => {
  it('is what `npm run generate:client` writes from the catalogue now (regenerate it when this fails)', () => {
    expect(readFileSync(join(ROOT, CLIENT_ERROR_CODES_PATH), 'utf8')).toBe(renderClientErrorCodes());
  });

  it("gives every code of the catalogue, in the catalogue's order, its status and retry advice", () => {
    expect(Object.keys(GATEWAY_ERROR_CODES)).toEqual([...ALL_ERROR_CODES]);
    expect(GATEWAY_ERROR_CODES).toEqual(ERROR_CODES);
    for (const code of ALL_ERROR_CODES) expect(GATEWAY_RETRY_ADVICE[code], code).toBe(ERROR_CATALOGUE[code].retry);
  });

  it("agrees with the client's retry policy: the client repeats exactly the codes the catalogue calls retryable", () => {
    for (const code of ALL_ERROR_CODES) expect(retryableAnswer(ERROR_CODES[code], code), code).toBe(isRetryable(code));
    // The status alone is not enough: a 409 is retried unless its code is final.
    expect(RETRYABLE_STATUSES.has(ERROR_CODES.card_canceled)).toBe(true);
    expect(retryableAnswer(ERROR_CODES.card_canceled, 'card_canceled')).toBe(false);
  });

  it('leaves client/src free of imports from outside client/ (the client has no build dependency on the gateway)', () => {
    const files = typescriptFiles(CLIENT_SRC);
    expect(files.map((file) => relative(CLIENT_SRC, file))).toContain('error-codes.ts');
    for (const file of files) {
      const source = readFileSync(file, 'utf8');
      for (const [, specifier] of source.matchAll(/\b(?:from|import)\s*\(?\s*['"]([^'"]+)['"]/g)) {
        if (!specifier?.startsWith('.')) continue;
        const target = relative(join(ROOT, 'client'), resolve(dirname(file), specifier));
        expect(target.startsWith(`..${sep}`) || target === '..', `${relative(ROOT, file)} imports ${specifier}`).toBe(false);
      }
    }
  });
});
