import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { waitFor } from './real-clients.js';

/**
 * The real entry point (`dist/src/main.js`) for the process-level tests: compiled once per
 * test file into its own folder under dist/ (so parallel files and other engineers' builds never
 * overwrite each other's output), then spawned with `--config`.
 */

const REPO = join(import.meta.dirname, '..', '..');

export interface CompiledEntryPoint {
  mainJs: string;
  remove(): void;
}

export async function compileEntryPoint(): Promise<CompiledEntryPoint> {
  const outDir = join(REPO, 'dist', `test-build-${process.pid}-${Date.now().toString(36)}`);
  const tsc = join(REPO, 'node_modules', 'typescript', 'bin', 'tsc');
  const output = await new Promise<string>((resolve) => {
    // Type errors elsewhere in src/ still emit JavaScript; only a missing entry point fails here.
    execFile(process.execPath, [tsc, '-p', 'src/tsconfig.json', '--outDir', outDir, '--sourceMap', 'false'], { cwd: REPO }, (_error, stdout, stderr) =>
      resolve(`${stdout}${stderr}`),
    );
  });
  const mainJs = join(outDir, 'src', 'main.js');
  if (!existsSync(mainJs)) throw new Error(`tsc did not emit ${mainJs}:\n${output}`);
  return { mainJs, remove: () => rmSync(outDir, { recursive: true, force: true }) };
}

export interface SpawnedGateway {
  child: ChildProcess;
  /** Every stdout line so far (the JSON log). */
  readonly stdout: string[];
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Waits for a log line (parsed JSON) that satisfies `match`, starting at line index `from`. */
  waitForLog(match: (line: Record<string, unknown>) => boolean, options?: { from?: number; timeoutMs?: number }): Promise<Record<string, unknown>>;
  /** SIGKILL if still running; for afterAll. */
  kill(): void;
}

export function spawnGateway(mainJs: string, configFile: string): SpawnedGateway {
  const child = spawn(process.execPath, [mainJs, '--config', configFile], {
    cwd: REPO,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, GATEWAY_CONFIG: '' },
  });
  const stdout: string[] = [];
  let pending = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    pending += chunk.toString('utf8');
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    stdout.push(...lines.filter(Boolean));
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  let done = false;
  void exited.then(() => {
    done = true;
  });
  const parse = (line: string): Record<string, unknown> | undefined => {
    try {
      return JSON.parse(line) as Record<string, unknown>;
    } catch {
      return undefined;
    }
  };
  return {
    child,
    stdout,
    stderr: () => stderr,
    exited,
    waitForLog: (match, options = {}) =>
      waitFor(
        () => `a matching log line (stdout so far:\n${stdout.join('\n')}\nstderr:\n${stderr})`,
        () => {
          for (const line of stdout.slice(options.from ?? 0)) {
            const parsed = parse(line);
            if (parsed && match(parsed)) return parsed;
          }
          if (done) throw new Error(`the gateway exited; stdout:\n${stdout.join('\n')}\nstderr:\n${stderr}`);
          return undefined;
        },
        options.timeoutMs ?? 15_000,
      ),
    kill: () => {
      if (!done) child.kill('SIGKILL');
    },
  };
}

export { freePort } from '../support/ports.js';
