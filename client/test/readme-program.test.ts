import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { withClientDist } from './support/client-dist.js';
import { programEnvironment, startRealGateway, type RealGateway } from './support/real-gateway.js';

/**
 * The README's complete program is the file examples/create-card.ts (checked here, so the two
 * cannot drift apart), type-checked by `npm run typecheck`, built with the README's command, and
 * run as its own process against a real gateway over TLS, as it runs against `npm start`.
 */

const run = promisify(execFile);
const repositoryRoot = fileURLToPath(new URL('../../', import.meta.url));
const clientRoot = fileURLToPath(new URL('../', import.meta.url));

describe("the client README's program", () => {
  let g: RealGateway | undefined;
  afterEach(async () => {
    await g?.close();
    g = undefined;
  });

  it('is examples/create-card.ts, verbatim', () => {
    const readme = readFileSync(`${clientRoot}README.md`, 'utf8');
    const program = /## A complete program[\s\S]*?```ts\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(program).toBeDefined();
    expect(program).toBe(readFileSync(`${clientRoot}examples/create-card.ts`, 'utf8'));
  });

  it('builds and runs against a real gateway: one card created, revealed by replay, then logged out', async () => {
    const readme = readFileSync(`${clientRoot}README.md`, 'utf8');
    expect(readme).toContain('npm run build --workspace @card-gateway/client && node client/dist/examples/create-card.js');

    g = await startRealGateway();
    const env = await programEnvironment(g);
    const program = `${clientRoot}dist/examples/create-card.js`;
    const [{ stdout, stderr }, failed] = await withClientDist(async () => {
      // The README's build command: the package (the example imports it by its name) and the example.
      await run('npm', ['run', 'build', '--silent', '--workspace', '@card-gateway/client'], { cwd: repositoryRoot });
      const succeeded = await run(process.execPath, [program], { cwd: repositoryRoot, env, timeout: 30_000 });
      const refused = await run(process.execPath, [program], { cwd: repositoryRoot, env: { ...env, GATEWAY_PASSWORD: 'wrong' }, timeout: 30_000 }).then(
        () => undefined,
        (error: unknown) => error as { code: number; stderr: string },
      );
      return [succeeded, refused] as const;
    });

    expect(stderr).toBe('');
    const lines = stdout.trim().split('\n');
    expect(lines[0]).toBe('session tokens updated');
    expect(lines[1]).toMatch(/^created card_[0-9a-f]+: \*{12}\d{4}, limit 10500 EUR$/);
    const cardId = /^created (card_[0-9a-f]+)/.exec(lines[1]!)?.[1];
    expect(lines[2]).toMatch(new RegExp(`^revealed ${cardId} \\(replayed: true\\): PAN ending \\d{4}, expires \\d{1,2}/\\d{4}$`));
    expect(lines[3]).toBe('session ended');
    expect(lines).toHaveLength(4);
    expect((await g.connectorStats()).cardsCreated).toBe(1);
    expect(g.auditEvents('card.revealed')).toHaveLength(1);
    expect(g.auditEvents('logout').filter((event) => event.outcome === 'success')).toHaveLength(1);

    // A failure is reported with its code and correlation id, and the exit code is 1.
    expect(failed?.code).toBe(1);
    expect(failed?.stderr).toMatch(/^failed: authentication_failed \(status 401, retryable false, correlationId [0-9a-f-]{36}\): Authentication failed\n$/);
  }, 300_000);
});
