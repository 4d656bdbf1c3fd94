import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

/**
 * `npm run lint` keeps the store's libraries inside src/store (issue 18: no library type crosses
 * the store port). Shown on the limiter's one user outside the store: auth-rate-limits.ts as it
 * is passes; importing rate-limiter-flexible's RateLimiterRes (a type import too) or ioredis is
 * refused, while the store's own limiter adapter imports it freely.
 */

const REPO = join(import.meta.dirname, '..', '..');
const RULE = '@typescript-eslint/no-restricted-imports';

async function refusals(file: string, text: string): Promise<string[]> {
  const [result] = await new ESLint({ cwd: REPO }).lintText(text, { filePath: join(REPO, file) });
  return (result?.messages ?? []).filter((message) => message.ruleId === RULE).map((message) => `${message.line}: ${message.message}`);
}

describe('the store-library check of npm run lint', () => {
  const limits = readFileSync(join(REPO, 'src', 'auth', 'auth-rate-limits.ts'), 'utf8');
  const adapter = readFileSync(join(REPO, 'src', 'store', 'limiter-result.ts'), 'utf8');
  const refused = 'Only src/store knows ioredis and rate-limiter-flexible: the rest of the gateway speaks the store port (store-types.ts).';

  it('passes src/auth/auth-rate-limits.ts as it is, and the store importing its libraries', async () => {
    expect(await refusals('src/auth/auth-rate-limits.ts', limits)).toEqual([]);
    expect(await refusals('src/store/limiter-result.ts', adapter)).toEqual([]);
  });

  it('refuses a library type or client imported outside src/store', async () => {
    const leaking = `import type { RateLimiterRes } from 'rate-limiter-flexible';\nimport { Redis } from 'ioredis';\nexport type Leak = [RateLimiterRes, Redis];\n${limits}`;
    expect(await refusals('src/auth/auth-rate-limits.ts', leaking)).toEqual([
      `1: 'rate-limiter-flexible' import is restricted from being used by a pattern. ${refused}`,
      `2: 'ioredis' import is restricted from being used by a pattern. ${refused}`,
    ]);
  }, 60_000);
});
