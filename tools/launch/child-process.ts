import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable } from 'node:stream';
import { parseJsonLine, readLines, type JsonLine } from './json-lines.js';

/**
 * One way to run a process of our own (a gateway, a sandbox connector, a benchmark server, the
 * load generator or the attacker) for the tests and the benchmark alike: spawned with the stdio
 * the caller needs, its stdout collected in lines, a wait for a JSON line that fails when the
 * process ends first or a hang guard expires, and a signal that waits for the exit.
 */

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface LaunchOptions {
  /**
   * Run the command behind these words (`['taskset', '-c', '1']` to pin it to a core). The
   * prefix must exec the command in its own process, so the pid stays the command's.
   */
  prefix?: readonly string[];
  cwd?: string;
  /** The whole environment of the child; default the parent's. */
  env?: NodeJS.ProcessEnv;
  /** 'pipe' to write requests to the child (`child.stdin`); default 'ignore'. */
  stdin?: 'ignore' | 'pipe';
  /** 'pipe' collects it (`stderr()`); 'inherit' shows it on ours. Default 'pipe'. */
  stderr?: 'pipe' | 'inherit';
  /** Takes the stdout pipe instead of the line collector (broken-pipe tests): no lines, no stdout text. */
  onStdout?: (stdout: Readable) => void;
}

export interface JsonLineWait {
  /** Index in `lines` to start looking at: lines already read before it are skipped. */
  from?: number;
  /** The hang guard: the wait fails after it. */
  guardMs: number;
  /** What is awaited, for the failure's message. */
  what?: string;
}

export interface LaunchedProcess {
  readonly child: ChildProcess;
  /** -1 when the command could not be spawned. */
  readonly pid: number;
  /** stdout split in lines, as they arrive. */
  readonly lines: string[];
  stdout(): string;
  stderr(): string;
  readonly exited: Promise<Exit>;
  /** After the exit and the end of stdout and stderr (every line read). */
  readonly closed: Promise<void>;
  hasExited(): boolean;
  /** The tail of stdout and stderr, for a failure's message. */
  describe(): string;
  /** Calls `listener` with every JSON line read from now on. */
  onJsonLine(listener: (line: JsonLine) => void): void;
  /** The first JSON line (from index `from`) that `match` accepts; rejects when the output ends first or the guard expires. */
  untilJsonLine(match: (line: JsonLine) => boolean, wait: JsonLineWait): Promise<JsonLine>;
  /** Resolves with the exit, or rejects as hung after `guardMs`. */
  exitWithin(guardMs: number): Promise<Exit>;
  /** Sends `signal` unless the process has exited, then waits for the exit. */
  stop(signal?: NodeJS.Signals): Promise<Exit>;
}

/** `[...prefix, command, ...args]` with the stdio of `options`; nothing is waited for. */
export function launch(command: string, args: readonly string[], options: LaunchOptions = {}): LaunchedProcess {
  const [program, ...programArgs] = [...(options.prefix ?? []), command, ...args] as [string, ...string[]];
  const child = spawn(program, programArgs, {
    ...(options.cwd !== undefined && { cwd: options.cwd }),
    ...(options.env !== undefined && { env: options.env }),
    stdio: [options.stdin ?? 'ignore', 'pipe', options.stderr ?? 'pipe'],
  });
  const lines: string[] = [];
  const lineListeners = new Set<() => void>();
  const jsonListeners: ((line: JsonLine) => void)[] = [];
  let out = '';
  let err = '';
  let done = false;
  // The awaited line can no longer come: every line is read, or nobody reads them.
  let ended = false;
  const wake = () => {
    for (const listener of [...lineListeners]) listener();
  };
  if (options.onStdout) options.onStdout(child.stdout!);
  else {
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
    });
    readLines(child.stdout!, (line) => {
      lines.push(line);
      if (jsonListeners.length > 0) {
        const parsed = parseJsonLine(line);
        if (parsed) for (const listener of jsonListeners) listener(parsed);
      }
      wake();
    });
  }
  child.stderr?.on('data', (chunk: Buffer) => {
    err += chunk.toString('utf8');
  });
  const exited = new Promise<Exit>((resolve) => {
    child.once('exit', (code, signal) => {
      done = true;
      if (options.onStdout) {
        ended = true;
        wake();
      }
      resolve({ code, signal });
    });
  });
  const closed = new Promise<void>((resolve) =>
    child.once('close', () => {
      ended = true;
      wake();
      resolve();
    }),
  );
  const describe = () => `stdout:\n${out.slice(-6000)}\nstderr:\n${err.slice(-3000)}`;
  return {
    child,
    pid: child.pid ?? -1,
    lines,
    stdout: () => out,
    stderr: () => err,
    exited,
    closed,
    hasExited: () => done,
    describe,
    onJsonLine: (listener) => {
      jsonListeners.push(listener);
    },
    untilJsonLine: (match, { from = 0, guardMs, what = 'a matching JSON line' }) =>
      new Promise<JsonLine>((resolve, reject) => {
        let index = from;
        const finish = (settle: () => void) => {
          clearTimeout(timer);
          lineListeners.delete(look);
          settle();
        };
        const look = () => {
          for (; index < lines.length; index += 1) {
            const parsed = parseJsonLine(lines[index] ?? '');
            if (parsed && match(parsed)) return finish(() => resolve(parsed));
          }
          if (ended) finish(() => reject(new Error(`the process exited before ${what}; ${describe()}`)));
        };
        const timer = setTimeout(() => finish(() => reject(new Error(`hung: waited ${guardMs} ms for ${what}; ${describe()}`))), guardMs);
        lineListeners.add(look);
        look();
      }),
    exitWithin: async (guardMs) => {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_resolve, reject) => {
        timer = setTimeout(() => reject(new Error(`hung: still running after ${guardMs} ms; ${describe()}`)), guardMs);
      });
      try {
        return await Promise.race([exited, timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
    stop: (signal = 'SIGKILL') => {
      if (!done) child.kill(signal);
      return exited;
    },
  };
}
