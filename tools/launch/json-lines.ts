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
