import type { ChildProcess } from 'node:child_process';
import type { Readable } from 'node:stream';

/**
 * The processes the tests and the benchmark start (the gateway, the sandbox connector, the
 * benchmark's servers) speak in JSON lines on stdout: their logs, or a `{"ready":true}` line.
 * One way to read them.
 */

export type JsonLine = Record<string, unknown>;

/** The line as a JSON object, or undefined when it is not one. */
export function parseJsonLine(line: string): JsonLine | undefined {
  try {
    const value: unknown = JSON.parse(line);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as JsonLine) : undefined;
  } catch {
    return undefined;
  }
}

/** Calls `onLine` with every complete non-empty line of `stream`, as it arrives. */
export function readLines(stream: Readable, onLine: (line: string) => void): void {
  let pending = '';
  stream.on('data', (chunk: Buffer | string) => {
    pending += chunk.toString();
    const parts = pending.split('\n');
    pending = parts.pop() ?? '';
    for (const part of parts) if (part) onLine(part);
  });
}

/**
 * Resolves with the first JSON line of the child's stdout that `match` accepts; rejects when the
 * child exits first, or after `guardMs` (a hang guard, its message naming what was awaited).
 * Lines already read are not seen: call it before the line can come.
 */
export function untilJsonLine(child: ChildProcess, what: string, match: (line: JsonLine) => boolean, guardMs = 120_000): Promise<JsonLine> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`hung: waited ${guardMs} ms for ${what}`)), guardMs);
    const exited = (code: number | null) => {
      clearTimeout(timer);
      reject(new Error(`${what}: the process exited (${code}) first`));
    };
    child.once('exit', exited);
    readLines(child.stdout!, (text) => {
      const line = parseJsonLine(text);
      if (!line || !match(line)) return;
      clearTimeout(timer);
      child.off('exit', exited);
      resolve(line);
    });
  });
}
