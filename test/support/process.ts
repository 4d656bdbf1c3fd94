import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { HANG_GUARD_MS, sleep } from './wait.js';
import { launch, type Exit, type LaunchedProcess, type LaunchOptions } from '../../tools/launch/child-process.js';
import { parseJsonLine, type JsonLine } from '../../tools/launch/json-lines.js';
import { ENVIRONMENT_OVERRIDES } from '../../src/config/environment-overrides.js';

/**
 * The real entry points as child processes, for every process-level test (operations,
 * transport, hostile, config, least-privilege, faults): one cached build of src/ per source
 * digest, and the shared launcher (tools/launch/child-process.ts) with what tests add to it: the
 * test environment, a hang guard no caller can shorten, and a registry that `killAll` empties.
 */

export const REPO = join(import.meta.dirname, '..', '..');

export interface BuiltEntryPoints {
  /** The compiled output folder (its `src/` mirrors the repository's). */
  readonly dir: string;
  readonly mainJs: string;
  readonly connectorJs: string;
  readonly hashPasswordJs: string;
  /** The local webhook receiver (`npm run events:listen`). */
  readonly eventsListenJs: string;
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

/**
 * A digest of what the compiled output depends on: a change of the sources is a new build. The
 * build compiles tools/ too (src/tsconfig.json), and what tools import of the client.
 */
function sourceDigest(): string {
  const hash = createHash('sha256');
  for (const file of [...['src', 'tools', 'client/src'].flatMap((folder) => filesUnder(join(REPO, folder))), join(REPO, 'tsconfig.json')]) {
    hash.update(relative(REPO, file)).update('\0').update(readFileSync(file)).update('\0');
  }
  return hash.digest('hex').slice(0, 16);
}

/** A wait's limit is a hang guard: never shorter than {@link HANG_GUARD_MS}, whatever a caller asked. */
const hangGuard = (asked: number | undefined): number => Math.max(asked ?? 0, HANG_GUARD_MS);

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
 * The entry points compiled once for all the test files of a run: into
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
      eventsListenJs: join(dir, 'tools', 'events-listen', 'main.js'),
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
// Child processes: the launcher of tools/launch/ with the tests' defaults and hang guard
// ---------------------------------------------------------------------------------------------

export type { Exit };

export interface RunningProcess extends Omit<LaunchedProcess, 'untilJsonLine' | 'exitWithin' | 'stop' | 'onJsonLine'> {
  /** The first stdout line (from index `from`) that is JSON and satisfies `match`; `timeoutMs` can only lengthen the hang guard. */
  waitForLog(match: (line: LogLine) => boolean, options?: { from?: number; timeoutMs?: number }): Promise<LogLine>;
  /** Resolves with the exit, or rejects as hung (after `timeoutMs` or the hang guard, whichever is longer). */
  exitWithin(timeoutMs: number): Promise<Exit>;
  /** SIGKILL unless it has exited, then waits for the exit. */
  kill(): Promise<void>;
}

export type LogLine = JsonLine;

/** A stdout line as the JSON object it logs, or undefined. */
export const parseLogLine: (line: string) => LogLine | undefined = parseJsonLine;

/** Every process a test started, so that `killAll` in an after hook leaves none behind. */
const started = new Set<RunningProcess>();

export interface StartOptions {
  env?: Record<string, string | undefined>;
  cwd?: string;
  /** Called with the stdout pipe instead of the line collector (broken-pipe tests): no lines, no stdout text. */
  onStdout?: LaunchOptions['onStdout'];
}

const NO_OVERRIDES = Object.fromEntries(ENVIRONMENT_OVERRIDES.map(({ variable }) => [variable, '']));

/** `command args...` with stdin closed and stdout and stderr collected. */
export function startProcess(command: string, args: readonly string[], options: StartOptions = {}): RunningProcess {
  const {
    untilJsonLine,
    exitWithin,
    stop,
    onJsonLine: _onJsonLine,
    ...launched
  } = launch(command, args, {
    cwd: options.cwd ?? REPO,
    // The gateway's own variables blank (an empty one changes nothing): a developer's shell never changes a test.
    env: { ...process.env, GATEWAY_CONFIG: '', ...NO_OVERRIDES, ...options.env },
    ...(options.onStdout && { onStdout: options.onStdout }),
  });
  const running: RunningProcess = {
    ...launched,
    waitForLog: (match, { from, timeoutMs } = {}) =>
      untilJsonLine(match, { ...(from !== undefined && { from }), guardMs: hangGuard(timeoutMs), what: 'the awaited log line' }),
    exitWithin: (timeoutMs) => exitWithin(hangGuard(timeoutMs)),
    kill: async () => {
      await stop('SIGKILL');
    },
  };
  started.add(running);
  void running.exited.then(() => started.delete(running));
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

/** `node <mainJs> --config <configFile>` (a compiled gateway entry point), not waited for. */
export function spawnEntry(mainJs: string, configFile: string, options: StartOptions = {}): RunningProcess {
  return startProcess(process.execPath, [mainJs, '--config', configFile], options);
}

/** Sends `signal` and waits for the first matching log line after it. */
export async function signalAndWait(running: RunningProcess, signal: NodeJS.Signals, match: (line: LogLine) => boolean, timeoutMs = 15_000): Promise<LogLine> {
  const from = running.lines.length;
  running.child.kill(signal);
  return running.waitForLog(match, { from, timeoutMs });
}
