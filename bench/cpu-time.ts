import { readFileSync, readdirSync } from 'node:fs';

/**
 * CPU time a process has used so far, in microseconds, read from outside it: the sum of its
 * threads' run time in /proc/<pid>/task/<tid>/schedstat (nanoseconds; the main thread, V8's
 * helpers and libuv's pool, the figure process.cpuUsage() gives inside it). Reading it costs the
 * process nothing and waits for nothing: a server busy with load answers a request for its own
 * figure late, which would move the edge of the window. Undefined where /proc has no schedstat.
 */
export function processCpuMicros(pid: number): number | undefined {
  return threadCpuMicros(pid)?.total;
}

/** The same, and the main thread's part of it (JavaScript runs there; V8's helpers and libuv's pool are the rest). */
export function threadCpuMicros(pid: number): { total: number; main: number } | undefined {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return undefined;
  }
  let nanoseconds = 0;
  let main = 0;
  for (const task of tasks) {
    try {
      const ran = Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]);
      nanoseconds += ran;
      if (task === String(pid)) main = ran;
    } catch {
      // A thread that ended between the listing and the read: its time is no longer counted anywhere.
    }
  }
  return Number.isFinite(nanoseconds) && tasks.length > 0 ? { total: nanoseconds / 1000, main: main / 1000 } : undefined;
}
