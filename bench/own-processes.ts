/**
 * Every process a bench run starts (servers, Redis, wrk, the Node generators, the attacker) is
 * handed to {@link ownProcess}; whatever is still running when the bench exits, normally, on an
 * error or on SIGINT/SIGTERM/SIGHUP, is killed then. A run never leaves a process behind (a
 * SIGKILL of the bench itself cannot be caught: the servers then exit when their stdin closes,
 * wrk and the generators at the end of their run; only a Redis of the bench's would stay).
 */
import type { ChildProcess } from 'node:child_process';

const running = new Set<ChildProcess>();

/** Registers `child` (or a launched process's child) to be killed when the bench exits. */
export function ownProcess<T extends ChildProcess | { child: ChildProcess }>(process: T): T {
  const owned: ChildProcess | { child: ChildProcess } = process;
  const child = 'child' in owned ? owned.child : owned;
  if (child.exitCode === null && child.signalCode === null) {
    running.add(child);
    child.once('exit', () => running.delete(child));
  }
  return process;
}

/** SIGKILLs every owned process still running; synchronous, so it works in an 'exit' listener. */
export function killOwnProcesses(): number {
  let killed = 0;
  for (const child of running) {
    if (child.exitCode === null && child.signalCode === null && child.kill('SIGKILL')) killed += 1;
  }
  running.clear();
  return killed;
}

/** Installs the exit and signal handlers that call {@link killOwnProcesses}. Call once. */
export function killOwnProcessesOnExit(): void {
  process.on('exit', () => {
    killOwnProcesses();
  });
  for (const [signal, number] of [
    ['SIGINT', 2],
    ['SIGTERM', 15],
    ['SIGHUP', 1],
  ] as const) {
    process.on(signal, () => {
      const killed = killOwnProcesses();
      process.stderr.write(`bench: ${signal}, killed ${killed} process(es) of the bench\n`);
      process.exit(128 + number);
    });
  }
}
