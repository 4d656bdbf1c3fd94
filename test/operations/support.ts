import { existsSync, readFileSync, renameSync, utimesSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { expect } from 'vitest';
import { call, type HttpAnswer } from '../hostile/support.js';
import { PASSWORD } from '../support/gateway-fixture.js';
import { builtEntryPoints, parseLogLine, runToExit, spawnEntry, type Exit, type LogLine, type RunningProcess, type StartOptions } from '../support/process.js';
import { HANG_GUARD_MS, waitFor } from '../support/wait.js';

/**
 * Issue 12 (the operator's day two) through the real entry points: the compiled gateway
 * (`dist/src/main.js`), the standalone sandbox connector and `npm start`, as child processes on
 * loopback, with their exit codes, stdout, stderr, log lines and audit files.
 */

export {
  builtEntryPoints,
  killAll,
  REPO,
  runToExit,
  signalAndWait,
  startProcess,
  type BuiltEntryPoints,
  type LogLine,
  type RunningProcess,
} from '../support/process.js';

// ---------------------------------------------------------------------------------------------
// The compiled gateway (child processes: test/support/process.ts)
// ---------------------------------------------------------------------------------------------

/** The compiled gateway CLI with `args`, to its exit. */
export async function gatewayCli(
  args: readonly string[],
  options: StartOptions & { timeoutMs?: number } = {},
): Promise<Exit & { stdout: string; stderr: string }> {
  const { mainJs } = await builtEntryPoints();
  return runToExit(process.execPath, [mainJs, ...args], options);
}

export interface GatewayProcess extends RunningProcess {
  readonly httpsUrl: string;
  readonly adminUrl: string;
  readonly plainUrl: string | undefined;
  /** The `gateway listening` log line. */
  readonly listening: LogLine;
}

/** `node dist/src/main.js --config FILE`, resolved once it logs `gateway listening`. */
export async function startGateway(configFile: string, options: StartOptions = {}): Promise<GatewayProcess> {
  const { mainJs } = await builtEntryPoints();
  const running = spawnEntry(mainJs, configFile, options);
  try {
    const listening = await running.waitForLog((line) => line['msg'] === 'gateway listening', { timeoutMs: HANG_GUARD_MS });
    return Object.assign(running, {
      httpsUrl: String(listening['https']),
      adminUrl: String(listening['admin']),
      plainUrl: typeof listening['plainHttp'] === 'string' ? listening['plainHttp'] : undefined,
      listening,
    });
  } catch (error) {
    await running.kill();
    throw error;
  }
}

// ---------------------------------------------------------------------------------------------
// Ports
// ---------------------------------------------------------------------------------------------

/** A listener of the test's own on a free loopback port, to make a port busy. */
export async function occupyPort(host = '127.0.0.1'): Promise<{ port: number; server: Server; close(): Promise<void> }> {
  const server = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address !== 'object') throw new Error('no port');
  return { port: address.port, server, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

// ---------------------------------------------------------------------------------------------
// Audit files
// ---------------------------------------------------------------------------------------------

export type AuditLine = Record<string, unknown> & { event: string };

/** The audit file's lines, parsed (a missing file is no lines). */
export function auditLines(file: string): AuditLine[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const parsed = parseLogLine(line);
      expect(parsed, line).toBeDefined();
      expect(typeof parsed?.['event'], line).toBe('string');
      return parsed as AuditLine;
    });
}

/** Polls the audit file (written asynchronously) until a line satisfies `match`. */
export async function waitForAudit(file: string, match: (line: AuditLine) => boolean): Promise<AuditLine> {
  return waitFor(
    () => `a matching audit line in ${file}; it has:\n${existsSync(file) ? readFileSync(file, 'utf8').slice(-4000) : '(no file)'}`,
    () => auditLines(file).find(match),
    { intervalMs: 50 },
  );
}

// ---------------------------------------------------------------------------------------------
// The API and the admin listener of a running gateway
// ---------------------------------------------------------------------------------------------

export const CARDS_PATH = '/api/v1/issuing/cards';

/** Logs in over TLS and returns the access token. */
export async function loginOver(httpsUrl: string, ca: string, username = 'full'): Promise<string> {
  const answer = await call(`${httpsUrl}/api/v1/auth/login`, { ca, body: JSON.stringify({ username, password: PASSWORD }), timeoutMs: HANG_GUARD_MS });
  expect(answer.status, answer.body).toBe(200);
  return (JSON.parse(answer.body) as { accessToken: string }).accessToken;
}

/** POST /api/v1/issuing/cards over TLS (`?revealDetails=true` with `reveal`). */
export function postCard(
  httpsUrl: string,
  ca: string,
  token: string,
  body: Record<string, unknown>,
  options: { reveal?: boolean; timeoutMs?: number } = {},
): Promise<HttpAnswer> {
  return call(`${httpsUrl}${CARDS_PATH}${options.reveal ? '?revealDetails=true' : ''}`, {
    ca,
    headers: { authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
    timeoutMs: options.timeoutMs ?? HANG_GUARD_MS,
  });
}

/** Files carry this mtime so the file watcher never fires: only SIGHUP reloads, until a test changes it. */
export const FIXED_MTIME_SECONDS = 1_700_000_000;

/** Replaces `file` at once (a rename, as an operator's deploy does), owner-only, with this mtime. */
export function replaceFile(file: string, content: string, mtimeSeconds = FIXED_MTIME_SECONDS): void {
  const temporary = `${file}.next`;
  writeFileSync(temporary, content, { mode: 0o600 });
  utimesSync(temporary, mtimeSeconds, mtimeSeconds);
  renameSync(temporary, file);
}

/** The log line that ends a reload, applied or refused. */
export const isReloadOutcome = (line: LogLine) => typeof line['msg'] === 'string' && /^configuration reload(ed| refused)/.test(line['msg']);

/** A valid card request for `acct-eu` with a fresh requestId: the in-process card tests' minimal body. */
export { validCardBody as cardBody } from '../support/card-fixture.js';

/** GET /metrics on the admin listener: 200 and the Prometheus text. */
export async function scrape(adminUrl: string): Promise<string> {
  const answer = await call(`${adminUrl}/metrics`, { timeoutMs: HANG_GUARD_MS });
  expect(answer.status).toBe(200);
  return answer.body;
}

export { call, type HttpAnswer } from '../hostile/support.js';
export { metricSum } from '../support/metrics.js';
