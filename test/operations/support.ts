import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join, relative } from 'node:path';
import { expect } from 'vitest';
import { call, type HttpAnswer } from '../hostile/support.js';
import { PASSWORD } from '../support/gateway-fixture.js';

/**
 * Issue 12 (the operator's day two) through the real entry points: the compiled gateway
 * (`dist/src/main.js`), the standalone sandbox connector and `npm start`, as child processes on
 * loopback, with their exit codes, stdout, stderr, log lines and audit files.
 */

export const REPO = join(import.meta.dirname, '..', '..');

export interface BuiltEntryPoints {
  /** The compiled output folder (its `src/` mirrors the repository's). */
  readonly dir: string;
  readonly mainJs: string;
  readonly connectorJs: string;
  readonly hashPasswordJs: string;
}

/** Every file under `folder`, sorted, relative to the repository. */
function filesUnder(folder: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(folder, { withFileTypes: true })) {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) found.push(...filesUnder(path));
    else if (entry.isFile()) found.push(path);
  }
  return found.sort();
}

/** A digest of what the compiled output depends on: a change of the sources is a new build. */
function sourceDigest(): string {
  const hash = createHash('sha256');
  for (const file of [...filesUnder(join(REPO, 'src')), join(REPO, 'tsconfig.json')]) {
    hash.update(relative(REPO, file)).update('\0').update(readFileSync(file)).update('\0');
  }
  return hash.digest('hex').slice(0, 16);
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function compileInto(outDir: string): Promise<string> {
  const tsc = join(REPO, 'node_modules', 'typescript', 'bin', 'tsc');
  return new Promise((resolve) => {
    // Type errors elsewhere in src/ still emit JavaScript; a missing entry point fails below.
    execFile(
      process.execPath,
      [tsc, '-p', 'src/tsconfig.json', '--outDir', outDir, '--sourceMap', 'false'],
      { cwd: REPO, timeout: 170_000 },
      (_error, stdout, stderr) => resolve(`${stdout}${stderr}`),
    );
  });
}

let built: Promise<BuiltEntryPoints> | undefined;

/**
 * The entry points compiled once for all the operations test files of a run: into
 * `dist/ops-build-<digest of src/>`, made by whichever file gets there first (a lock folder;
 * the others wait for it), never shared with a build of other sources. Builds of other sources
 * older than an hour are removed.
 */
export function builtEntryPoints(): Promise<BuiltEntryPoints> {
  built ??= (async () => {
    const dist = join(REPO, 'dist');
    mkdirSync(dist, { recursive: true });
    const name = `ops-build-${sourceDigest()}`;
    const dir = join(dist, name);
    const complete = join(dir, '.complete');
    const lock = `${dir}.lock`;
    const result: BuiltEntryPoints = {
      dir,
      mainJs: join(dir, 'src', 'main.js'),
      connectorJs: join(dir, 'src', 'connector', 'sandbox', 'main.js'),
      hashPasswordJs: join(dir, 'src', 'auth', 'hash-password-cli.js'),
    };
    const deadline = Date.now() + 170_000;
    while (!existsSync(complete)) {
      let mine = false;
      try {
        mkdirSync(lock);
        mine = true;
      } catch {
        // Another test file is compiling; a lock older than 2 minutes is left from a killed run.
        try {
          if (Date.now() - statSync(lock).mtimeMs > 120_000) rmSync(lock, { recursive: true, force: true });
        } catch {
          // gone meanwhile
        }
      }
      if (mine) {
        try {
          if (!existsSync(complete)) {
            const temporary = `${dir}.tmp-${process.pid}`;
            rmSync(temporary, { recursive: true, force: true });
            const output = await compileInto(temporary);
            if (!existsSync(join(temporary, 'src', 'main.js'))) throw new Error(`tsc did not emit src/main.js:\n${output}`);
            writeFileSync(join(temporary, '.complete'), new Date().toISOString());
            if (existsSync(complete)) {
              // Another file finished the same build meanwhile (after taking a stale lock): use it.
              rmSync(temporary, { recursive: true, force: true });
            } else {
              rmSync(dir, { recursive: true, force: true }); // a partial build of a killed run
              renameSync(temporary, dir);
            }
          }
        } finally {
          rmSync(lock, { recursive: true, force: true });
        }
        break;
      }
      if (Date.now() > deadline) throw new Error(`no build appeared in ${dir} within 170 s`);
      await sleep(250);
    }
    for (const entry of readdirSync(dist)) {
      if (!entry.startsWith('ops-build-') || entry === name || entry.endsWith('.lock')) continue;
      const path = join(dist, entry);
      try {
        if (Date.now() - statSync(path).mtimeMs > 3_600_000) rmSync(path, { recursive: true, force: true });
      } catch {
        // removed by another run
      }
    }
    return result;
  })();
  return built;
}

// ---------------------------------------------------------------------------------------------
// Child processes
// ---------------------------------------------------------------------------------------------

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface RunningProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  /** stdout split in lines, as they arrive. */
  readonly lines: string[];
  stdout(): string;
  stderr(): string;
  readonly exited: Promise<Exit>;
  /** After the exit and the end of stdout and stderr (every line read). */
  readonly closed: Promise<void>;
  hasExited(): boolean;
  /** The first stdout line (from index `from`) that is JSON and satisfies `match`. */
  waitForLog(match: (line: LogLine) => boolean, options?: { from?: number; timeoutMs?: number }): Promise<LogLine>;
  /** Resolves with the exit, or rejects when the process still runs after `timeoutMs`. */
  exitWithin(timeoutMs: number): Promise<Exit>;
  /** SIGKILL unless it has exited, then waits for the exit. */
  kill(): Promise<void>;
}

export type LogLine = Record<string, unknown>;

export function parseLogLine(line: string): LogLine | undefined {
  try {
    const value: unknown = JSON.parse(line);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as LogLine) : undefined;
  } catch {
    return undefined;
  }
}

/** Every process a test started, so that `killAll` in an after hook leaves none behind. */
const started = new Set<RunningProcess>();

export interface StartOptions {
  env?: Record<string, string | undefined>;
  cwd?: string;
}

/** `command args...` with stdin closed and stdout and stderr collected. */
export function startProcess(command: string, args: readonly string[], options: StartOptions = {}): RunningProcess {
  const child = spawn(command, [...args], {
    cwd: options.cwd ?? REPO,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, GATEWAY_CONFIG: '', ...options.env },
  });
  const lines: string[] = [];
  let out = '';
  let pending = '';
  let err = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    out += text;
    pending += text;
    const parts = pending.split('\n');
    pending = parts.pop() ?? '';
    lines.push(...parts.filter(Boolean));
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    err += chunk.toString('utf8');
  });
  let done = false;
  const exited = new Promise<Exit>((resolve) => {
    child.once('exit', (code, signal) => {
      done = true;
      resolve({ code, signal });
    });
  });
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const describe = () => `stdout:\n${out.slice(-6000)}\nstderr:\n${err.slice(-3000)}`;
  const running: RunningProcess = {
    child,
    pid: child.pid ?? -1,
    lines,
    stdout: () => out,
    stderr: () => err,
    exited,
    closed,
    hasExited: () => done,
    waitForLog: async (match, { from = 0, timeoutMs = 15_000 } = {}) => {
      const deadline = Date.now() + timeoutMs;
      let index = from;
      for (;;) {
        for (; index < lines.length; index += 1) {
          const parsed = parseLogLine(lines[index] ?? '');
          if (parsed && match(parsed)) return parsed;
        }
        if (done) {
          await sleep(50); // the last lines may still be in the pipe
          if (index >= lines.length) throw new Error(`the process exited before the awaited log line; ${describe()}`);
          continue;
        }
        if (Date.now() > deadline) throw new Error(`no matching log line within ${timeoutMs} ms; ${describe()}`);
        await sleep(20);
      }
    },
    exitWithin: async (timeoutMs) => {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_resolve, reject) => {
        timer = setTimeout(() => reject(new Error(`still running after ${timeoutMs} ms; ${describe()}`)), timeoutMs);
      });
      try {
        return await Promise.race([exited, timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
    kill: async () => {
      if (!done) child.kill('SIGKILL');
      await exited;
    },
  };
  started.add(running);
  void exited.then(() => started.delete(running));
  return running;
}

/** SIGKILLs every process started here that still runs (after hooks). */
export async function killAll(): Promise<void> {
  await Promise.all([...started].map((running) => running.kill()));
}

/** Runs to the end; a process still running after `timeoutMs` is killed and fails the test. */
export async function runToExit(
  command: string,
  args: readonly string[],
  options: StartOptions & { timeoutMs?: number } = {},
): Promise<Exit & { stdout: string; stderr: string }> {
  const running = startProcess(command, args, options);
  try {
    const exit = await running.exitWithin(options.timeoutMs ?? 20_000);
    // 'exit' can come before the pipes are drained; 'close' comes after both.
    await Promise.race([running.closed, sleep(2000)]);
    return { ...exit, stdout: running.stdout(), stderr: running.stderr() };
  } finally {
    await running.kill();
  }
}

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
  const running = startProcess(process.execPath, [mainJs, '--config', configFile], options);
  try {
    const listening = await running.waitForLog((line) => line['msg'] === 'gateway listening', { timeoutMs: 20_000 });
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

/** Sends `signal` and waits for the first matching log line after it. */
export async function signalAndWait(running: RunningProcess, signal: NodeJS.Signals, match: (line: LogLine) => boolean, timeoutMs = 15_000): Promise<LogLine> {
  const from = running.lines.length;
  running.child.kill(signal);
  return running.waitForLog(match, { from, timeoutMs });
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

/** Resolves with the error code of a TCP connection attempt, or 'connected'. */
export async function connectOutcome(url: string, timeoutMs = 3000): Promise<string> {
  const { connect } = await import('node:net');
  const target = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: target.hostname.replace(/^\[|\]$/g, ''), port: Number(target.port) });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve('timeout');
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve(error.code ?? error.message);
    });
  });
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
export async function waitForAudit(file: string, match: (line: AuditLine) => boolean, timeoutMs = 10_000): Promise<AuditLine> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = auditLines(file).find(match);
    if (found) return found;
    if (Date.now() > deadline)
      throw new Error(
        `no matching audit line in ${file} within ${timeoutMs} ms; it has:\n${existsSync(file) ? readFileSync(file, 'utf8').slice(-4000) : '(no file)'}`,
      );
    await sleep(50);
  }
}

// ---------------------------------------------------------------------------------------------
// The API and the admin listener of a running gateway
// ---------------------------------------------------------------------------------------------

export const CARDS_PATH = '/api/v1/issuing/cards';

/** Logs in over TLS and returns the access token. */
export async function loginOver(httpsUrl: string, ca: string, username = 'full'): Promise<string> {
  const answer = await call(`${httpsUrl}/api/v1/auth/login`, { ca, body: JSON.stringify({ username, password: PASSWORD }), timeoutMs: 10_000 });
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
    timeoutMs: options.timeoutMs ?? 10_000,
  });
}

/** A valid card request for `acct-eu` with a fresh requestId. */
export function cardBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { requestId: randomUUID(), cardLimit: 10_000, currency: 'EUR', ...overrides };
}

/** GET /metrics on the admin listener: 200 and the Prometheus text. */
export async function scrape(adminUrl: string): Promise<string> {
  const answer = await call(`${adminUrl}/metrics`, { timeoutMs: 5000 });
  expect(answer.status).toBe(200);
  return answer.body;
}

export { call, metricSum, type HttpAnswer } from '../hostile/support.js';
