import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENT_ROOT, withClientDist } from './support/client-dist.js';
import { programEnvironment, startRealGateway, type RealGateway } from './support/real-gateway.js';

/**
 * The client as an integrator gets it, by the words of its README's "Install" section alone: its
 * pack command run at the repository root (its prepack builds), then its install command run in
 * an empty project outside the repository with the tarball's path in place of `/path/to/`. Then
 * a program from ESM and one from CommonJS log in and create a card against a real gateway and
 * verify a signed webhook delivery, and
 * a TypeScript consumer type-checks under each module resolution (node16, bundler, node). No
 * network: the one runtime dependency, undici, is packed from this repository's node_modules and
 * installed first, and the README's commands run with `--offline` (and the pack with a
 * destination outside the repository). `npm run check:client-package` runs this file alone.
 */

const run = promisify(execFile);
const REPO = join(CLIENT_ROOT, '..');
const TSC = join(REPO, 'node_modules', 'typescript', 'bin', 'tsc');

interface Packed {
  filename: string;
  files: { path: string }[];
}

/** `npm pack --json` of `folder` into `destination`; what npm says it packed. */
async function pack(folder: string, destination: string, ...flags: string[]): Promise<Packed> {
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', destination, ...flags, folder], { cwd: destination, timeout: 200_000 });
  // Whatever the prepack build prints comes to stdout before npm's JSON.
  const packed = JSON.parse(stdout.slice(stdout.indexOf('\n[') + 1)) as Packed[];
  return packed[0]!;
}

/**
 * One program, written once, run as an ES module and as CommonJS: verifies a webhook delivery it
 * signs and refuses a forged one, logs in, creates a card, has an invalid one refused, reads and
 * freezes the card, logs out, and prints which file of the package it loaded.
 */
const PROGRAM = `const secret = 'whsec_' + Buffer.from('package check webhook key').toString('base64');
const body = JSON.stringify({ id: 'evt_package', type: 'card.created', createdAt: '2026-11-29T09:00:00.123Z', issuingAccount: 'acct_demo', sequence: 1, data: { card: { cardId: 'card_1' } } });
const timestamp = String(Math.floor(Date.now() / 1000));
const signature = createHmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64')).update('evt_package.' + timestamp + '.' + body).digest('base64');
const webhookHeaders = { 'webhook-id': 'evt_package', 'webhook-timestamp': timestamp, 'webhook-signature': 'v1,' + signature };
const verified = verifyEvent(secret, webhookHeaders, body).type;
let forged = 'accepted';
try {
  verifyEvent(secret, { ...webhookHeaders, 'webhook-signature': 'v1,' + (signature[0] === 'A' ? 'B' : 'A') + signature.slice(1) }, body);
} catch (error) {
  forged = error instanceof WebhookVerificationError ? error.reason : String(error);
}
const client = new CardGatewayClient({ baseUrl: process.env.GATEWAY_URL, ca: readFileSync(process.env.GATEWAY_CA_FILE) });
try {
  await client.login(process.env.GATEWAY_USERNAME, process.env.GATEWAY_PASSWORD);
  const created = await client.createCard({ cardLimit: 10_000, currency: 'EUR' });
  const refused = await client.createCard({ cardLimit: -1, currency: 'EUR' }).catch((error) => error);
  const read = await client.getCard(created.card.cardId);
  const frozen = await client.freezeCard(created.card.cardId, 'package check');
  console.log(JSON.stringify({
    module: loaded,
    cardId: created.card.cardId,
    pan: created.card.pan,
    refused: refused instanceof CardGatewayError ? refused.code : String(refused),
    read: { cardId: read.cardId, requestId: read.requestId === created.requestId, status: read.status },
    frozen: frozen.status,
    event: { verified, forged },
  }));
  await client.logout();
} finally {
  await client.close();
}
`;

const ESM_PROGRAM = `import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { CardGatewayClient, CardGatewayError, verifyEvent, WebhookVerificationError } from '@card-gateway/client';
const loaded = import.meta.resolve('@card-gateway/client');
${PROGRAM}`;

const CJS_PROGRAM = `const { createHmac } = require('node:crypto');
const { readFileSync } = require('node:fs');
const { CardGatewayClient, CardGatewayError, verifyEvent, WebhookVerificationError } = require('@card-gateway/client');
const loaded = require.resolve('@card-gateway/client');
(async () => {
${PROGRAM}})().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
`;

/** A TypeScript consumer: every public name it uses must resolve to real types (strict, no `any`). */
const CONSUMER = `import {
  CardGatewayClient,
  CardGatewayError,
  SessionEndedError,
  GATEWAY_ERROR_CODES,
  verifyEvent,
  WebhookVerificationError,
  type CardRecord,
  type CreatedCard,
  type GatewayErrorCode,
  type GatewayEvent,
  type WebhookVerificationReason,
} from '@card-gateway/client';

export async function issue(client: CardGatewayClient): Promise<CreatedCard | GatewayErrorCode | string> {
  try {
    await client.login('demo', 'local-demo-password', { deadlineMs: 10_000 });
    return await client.createCard({ cardLimit: 10_000, currency: 'EUR', metadata: { card_name: 'Trip' } }, { revealDetails: true });
  } catch (error) {
    if (error instanceof SessionEndedError) return error.reason;
    if (error instanceof CardGatewayError) return error.code;
    throw error;
  }
}

export async function frozenCards(client: CardGatewayClient): Promise<CardRecord[]> {
  const frozen: CardRecord[] = [];
  for await (const card of client.listCards({ status: 'inactive', limit: 100 })) frozen.push(card);
  return frozen;
}

export const client = new CardGatewayClient({ baseUrl: 'https://127.0.0.1:8443', onRetry: (event) => console.log(event.operation, event.delayMs) });
export const status: number = GATEWAY_ERROR_CODES.rate_limited;

export function received(secrets: string[], headers: Record<string, string | string[] | undefined>, body: Uint8Array): string | WebhookVerificationReason {
  try {
    const event: GatewayEvent = verifyEvent(secrets, headers, body, { toleranceSeconds: 300 });
    switch (event.type) {
      case 'card.status_changed':
        return event.data.card.cardId + ' ' + event.data.previousStatus + ' ' + event.data.status;
      case 'transaction.declined':
        return String(event.data.amount) + ' ' + (event.data.declineReason ?? '');
      default:
        return event.id + ' ' + String(event.sequence);
    }
  } catch (error) {
    if (error instanceof WebhookVerificationError) return error.reason;
    throw error;
  }
}
`;

/** The same consumer with one type error: the check must catch it, or it proves nothing. */
const BROKEN_CONSUMER = `${CONSUMER}export const wrong = client.createCard({ cardLimit: '100', currency: 'EUR' });\n`;

const RESOLUTIONS = {
  node16: { module: 'Node16', moduleResolution: 'Node16' },
  bundler: { module: 'ESNext', moduleResolution: 'Bundler' },
  node: { module: 'CommonJS', moduleResolution: 'Node10' },
} as const;

/** The commands of the README's "Install" section, each code block's one line, split into words. */
function readmeInstallCommands(): string[][] {
  const readme = readFileSync(join(CLIENT_ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Install'), readme.indexOf('\n## ', readme.indexOf('## Install') + 1));
  return [...section.matchAll(/```sh\n([^\n]+)\n```/g)].map((match) => match[1]!.trim().split(/\s+/));
}

const OFFLINE = ['--offline', '--no-audit', '--no-fund', '--no-update-notifier'];

describe('the client package, packed and installed into an empty project by its README', () => {
  let scratch: string;
  let app: string;
  let packed: Packed;
  let g: RealGateway | undefined;
  const [packCommand = [], installCommand = []] = readmeInstallCommands();

  beforeAll(async () => {
    scratch = realpathSync(mkdtempSync(join(tmpdir(), 'client-package-')));
    const tarballs = join(scratch, 'tarballs');
    app = join(scratch, 'app');
    mkdirSync(tarballs);
    mkdirSync(app);
    // The README's pack command, at the repository root, as it says.
    expect(packCommand.slice(0, 2)).toEqual(['npm', 'pack']);
    packed = await withClientDist(async () => {
      const { stdout } = await run(packCommand[0]!, [...packCommand.slice(1), '--json', '--pack-destination', tarballs], { cwd: REPO, timeout: 200_000 });
      return (JSON.parse(stdout.slice(stdout.indexOf('\n[') + 1)) as Packed[])[0]!;
    });
    const undici = await pack(join(REPO, 'node_modules', 'undici'), tarballs, '--ignore-scripts');
    writeFileSync(join(app, 'package.json'), `${JSON.stringify({ name: 'client-package-check', private: true, type: 'module' })}\n`);
    // What the registry would give the install: its one dependency, offline.
    await run('npm', ['install', ...OFFLINE, join(tarballs, undici.filename)], { cwd: app, timeout: 120_000 });
    // The README's install command, with the tarball it named where it says /path/to/.
    expect(installCommand.slice(0, 2)).toEqual(['npm', 'install']);
    const install = installCommand.slice(1).map((word) => (word.startsWith('/path/to/') ? join(tarballs, word.slice('/path/to/'.length)) : word));
    await run('npm', [...install, ...OFFLINE], { cwd: app, timeout: 120_000 });
  }, 300_000);

  it('names the tarball the pack command writes, and installs it as a file: dependency', () => {
    expect(installCommand.at(-1)).toBe(`/path/to/${packed.filename}`);
    const manifest = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    expect(manifest.dependencies['@card-gateway/client']).toMatch(new RegExp(`^file:.*${packed.filename.replace(/\./g, '\\.')}$`));
  });

  afterAll(async () => {
    await g?.close();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it('ships the ESM and CommonJS builds with their declarations, the README, the LICENSE and the manifest: no sources, tests or examples', () => {
    const paths = packed.files.map((file) => file.path).sort();
    const outside = paths.filter((path) => !path.startsWith('dist/esm/') && !path.startsWith('dist/cjs/'));
    expect(outside).toEqual(['LICENSE', 'README.md', 'package.json']);
    for (const build of ['esm', 'cjs']) {
      expect(paths).toContain(`dist/${build}/index.js`);
      expect(paths).toContain(`dist/${build}/index.d.ts`);
      expect(paths.filter((path) => path.startsWith(`dist/${build}/`) && path.endsWith('.ts') && !path.endsWith('.d.ts'))).toEqual([]);
    }
    expect(paths).toContain('dist/cjs/package.json');
    const installed = join(app, 'node_modules', '@card-gateway', 'client');
    expect(JSON.parse(readFileSync(join(installed, 'dist', 'cjs', 'package.json'), 'utf8'))).toEqual({ type: 'commonjs' });
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as {
      version: string;
      license: string;
      dependencies: Record<string, string>;
    };
    expect(manifest.version).toMatch(/^\d+\.\d+\.\d+$/);
    expect(Object.keys(manifest.dependencies)).toEqual(['undici']);
    // Apache-2.0, the repository's licence, its text shipped in the package.
    expect(manifest.license).toBe('Apache-2.0');
    const license = readFileSync(join(installed, 'LICENSE'), 'utf8');
    expect(license).toBe(readFileSync(join(REPO, 'LICENSE'), 'utf8'));
    expect(license).toMatch(/^\s+Apache License\n\s+Version 2\.0, January 2004\n/);
    expect((JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { license: string }).license).toBe('Apache-2.0');
    expect(readFileSync(join(installed, 'README.md'), 'utf8')).toContain(`npm install /path/to/${packed.filename}`);
  });

  it('logs in, creates, reads and freezes a card and verifies a webhook delivery from an ESM program and from a CommonJS program, each loading its own build', async () => {
    g = await startRealGateway();
    writeFileSync(join(app, 'program.mjs'), ESM_PROGRAM);
    writeFileSync(join(app, 'program.cjs'), CJS_PROGRAM);
    const env = await programEnvironment(g, 'life');
    const installed = join(app, 'node_modules', '@card-gateway', 'client', 'dist');
    for (const [program, build] of [
      ['program.mjs', 'esm'],
      ['program.cjs', 'cjs'],
    ] as const) {
      const { stdout, stderr } = await run(process.execPath, [program], { cwd: app, env, timeout: 60_000 });
      expect(stderr, program).toBe('');
      const result = JSON.parse(stdout) as { module: string; cardId: string; pan: string; refused: string; read: unknown; frozen: string; event: unknown };
      expect(result.module.startsWith('file:') ? fileURLToPath(result.module) : result.module, program).toBe(join(installed, build, 'index.js'));
      expect(result.cardId, program).toMatch(/^card_[0-9a-f]+$/);
      expect(result.pan, program).toMatch(/^\*{12}\d{4}$/);
      // The error classes of the build loaded are the ones its errors are made of.
      expect(result.refused, program).toBe('validation_failed');
      expect(result.read, program).toEqual({ cardId: result.cardId, requestId: true, status: 'active' });
      expect(result.frozen, program).toBe('inactive');
      // verifyEvent from the same build: a signed delivery verified, a forged one refused with that build's error class.
      expect(result.event, program).toEqual({ verified: 'card.created', forged: 'bad_signature' });
    }
    expect((await g.connectorStats()).cardsCreated).toBe(2);
    expect(g.auditEvents('card.status_changed')).toHaveLength(2);
    expect(g.auditEvents('logout').filter((event) => event.outcome === 'success')).toHaveLength(2);
  }, 120_000);

  it.each(Object.keys(RESOLUTIONS) as (keyof typeof RESOLUTIONS)[])(
    'type-checks a TypeScript consumer under moduleResolution %s, and catches its type error',
    async (resolution) => {
      const folder = join(app, `types-${resolution}`);
      mkdirSync(folder, { recursive: true });
      const files = ['consumer.ts', ...(resolution === 'node16' ? ['consumer.cts'] : [])];
      for (const file of files) writeFileSync(join(folder, file), CONSUMER);
      writeFileSync(join(folder, 'broken.ts'), BROKEN_CONSUMER);
      const tsconfig = (include: string[]) => ({
        compilerOptions: {
          ...RESOLUTIONS[resolution],
          target: 'ES2022',
          lib: ['ES2023'],
          strict: true,
          noEmit: true,
          skipLibCheck: false,
          types: ['node'],
          typeRoots: [join(REPO, 'node_modules', '@types')],
        },
        files: include,
      });
      writeFileSync(join(folder, 'tsconfig.json'), JSON.stringify(tsconfig(files)));
      writeFileSync(join(folder, 'tsconfig.broken.json'), JSON.stringify(tsconfig(['broken.ts'])));

      const good = await run(process.execPath, [TSC, '-p', 'tsconfig.json', '--traceResolution'], { cwd: folder, timeout: 120_000 });
      // The types came from the installed package, from the build of the consumer's module format.
      const resolved = [...good.stdout.matchAll(/Module name '@card-gateway\/client' was successfully resolved to '([^']+)'/g)].map((match) => match[1]);
      const expected = resolution === 'node' ? ['cjs'] : resolution === 'bundler' ? ['esm'] : ['esm', 'cjs'];
      expect(new Set(resolved)).toEqual(new Set(expected.map((build) => join(app, 'node_modules', '@card-gateway', 'client', 'dist', build, 'index.d.ts'))));

      const broken = await run(process.execPath, [TSC, '-p', 'tsconfig.broken.json'], { cwd: folder, timeout: 120_000 }).then(
        () => undefined,
        (error: unknown) => error as { code: number; stdout: string },
      );
      expect(broken?.code).toBe(2);
      expect(broken?.stdout).toMatch(/broken\.ts\(\d+,\d+\): error TS2322: Type 'string' is not assignable to type 'number'/);
    },
    120_000,
  );
});
