import { fstatSync, mkdirSync, openSync, write } from 'node:fs';
import { Socket } from 'node:net';
import { dirname } from 'node:path';
import { pino, type DestinationStream, type Logger } from 'pino';
import { maskCardNumbers } from '../foundation/card-number-detector.js';
import { maskedForLine } from './line-masking.js';

/**
 * Paths pino blanks out before a line is written. The gateway never logs bodies or URLs with
 * query strings in the first place; this is the second line of defence (Standards: no
 * password, token, PAN or CVC in any log line).
 */
export const REDACTED_PATHS = [
  'authorization',
  'password',
  'refreshToken',
  'accessToken',
  'idToken',
  'pan',
  'cvc',
  '*.authorization',
  '*.password',
  '*.refreshToken',
  '*.accessToken',
  '*.idToken',
  '*.pan',
  '*.cvc',
  '*.headers.authorization',
  '*.headers.cookie',
  '*.*.password',
  '*.*.pan',
  '*.*.cvc',
  '*.*.refreshToken',
];

/** A pino destination that can be drained on shutdown and counts the lines it had to drop. */
export interface LogDestination extends DestinationStream {
  /** Lines dropped because the sink was broken or could not keep up. */
  readonly dropped: number;
  /** Hands what is buffered to the sink, waiting at most `timeoutMs`; never blocks the loop. */
  close(timeoutMs?: number): Promise<void>;
}

/** One notice on stderr, written asynchronously: stderr may be as broken as stdout. */
function notice(text: string): void {
  write(2, `${text}\n`, () => undefined);
}

/**
 * Where the service's own log lines go (stdout, or a file): lines are batched (4 KiB, or every
 * 250 ms) and written asynchronously. A pipe or socket (a log shipper) is written through a
 * non-blocking libuv stream: a reader that stops reading makes lines pile up to 1 MiB and then
 * be dropped, and a reader that goes away (EPIPE) is reported once on stderr and all further
 * lines are dropped. Nothing ever waits on the sink: no synchronous flush, at exit or otherwise
 * (a synchronous flush into a dead pipe is how a process stops answering SIGTERM). Lines of the
 * last 250 ms can be lost in a crash; the audit trail has its own writer (file-appender.ts).
 */
export function createLogDestination(dest: number | string): LogDestination {
  const fd = typeof dest === 'number' ? dest : openLogFile(dest);
  const stat = fstatSync(fd);
  const sink = stat.isFIFO() || stat.isSocket() ? streamSink(fd) : fdSink(fd);
  let buffer: string[] = [];
  let bytes = 0;
  let dropped = 0;
  let dead = false;
  const flush = () => {
    if (buffer.length === 0) return;
    const chunk = buffer.join('');
    const lines = buffer.length;
    buffer = [];
    bytes = 0;
    if (dead || !sink.send(chunk)) dropped += lines;
  };
  sink.onBroken((code) => {
    if (dead) return;
    dead = true;
    notice(`card gateway: log output failed (${code}); log lines are dropped from now on, the service goes on`);
  });
  const timer = setInterval(flush, 250);
  timer.unref();
  return {
    write(line: string): boolean {
      if (dead) {
        dropped += 1;
        return true;
      }
      buffer.push(line);
      bytes += line.length;
      if (bytes >= 4096) flush();
      return true;
    },
    get dropped() {
      return dropped;
    },
    async close(timeoutMs = 1000) {
      clearInterval(timer);
      flush();
      await sink.drain(timeoutMs);
    },
  };
}

function openLogFile(path: string): number {
  mkdirSync(dirname(path), { recursive: true });
  return openSync(path, 'a', 0o640);
}

interface Sink {
  /** False when the chunk had to be dropped. */
  send(chunk: string): boolean;
  onBroken(listener: (code: string) => void): void;
  drain(timeoutMs: number): Promise<void>;
}

const MAX_QUEUED_BYTES = 1024 * 1024;

/** Pipes and sockets: a libuv stream, which never blocks a thread on a full pipe. */
function streamSink(fd: number): Sink {
  const stream = new Socket({ fd, readable: false, writable: true });
  let broken: ((code: string) => void) | undefined;
  let unwritten = 0;
  const idle: (() => void)[] = [];
  const settle = () => {
    if (unwritten === 0 || stream.destroyed) for (const resume of idle.splice(0)) resume();
  };
  stream.on('error', (error: NodeJS.ErrnoException) => {
    broken?.(error.code ?? 'error');
    stream.destroy();
    settle();
  });
  // Never keep the process alive for the log stream.
  stream.unref();
  return {
    send(chunk) {
      if (stream.destroyed || stream.writableLength > MAX_QUEUED_BYTES) return false;
      unwritten += 1;
      stream.write(chunk, () => {
        unwritten -= 1;
        settle();
      });
      return true;
    },
    onBroken(listener) {
      broken = listener;
    },
    drain: (timeoutMs) =>
      new Promise((resolve) => {
        if (stream.destroyed || unwritten === 0) return resolve();
        const timer = setTimeout(resolve, timeoutMs).unref();
        idle.push(() => {
          clearTimeout(timer);
          resolve();
        });
      }),
  };
}

/** Files, terminals and devices: asynchronous writes through the thread pool, one at a time. */
function fdSink(fd: number): Sink {
  const queue: string[] = [];
  let queued = 0;
  let writing = false;
  let failed = false;
  let broken: ((code: string) => void) | undefined;
  const idle: (() => void)[] = [];
  const next = () => {
    const chunk = queue.shift();
    if (chunk === undefined || failed) {
      writing = false;
      for (const resume of idle.splice(0)) resume();
      return;
    }
    queued -= chunk.length;
    writing = true;
    write(fd, chunk, (error) => {
      if (error) {
        failed = true;
        queue.length = 0;
        broken?.(error.code ?? 'error');
      }
      next();
    });
  };
  return {
    send(chunk) {
      if (failed || queued > MAX_QUEUED_BYTES) return false;
      queue.push(chunk);
      queued += chunk.length;
      if (!writing) next();
      return true;
    },
    onBroken(listener) {
      broken = listener;
    },
    drain: (timeoutMs) =>
      new Promise((resolve) => {
        if (!writing) return resolve();
        const timer = setTimeout(resolve, timeoutMs).unref();
        idle.push(() => {
          clearTimeout(timer);
          resolve();
        });
      }),
  };
}

/**
 * The service's logger. Every line's fields and message pass the card-number detector (D58,
 * line-masking.ts) before redaction and serialization: a card number written into any logged
 * text, metadata or error message is masked to its last four digits. Lines are few (none per
 * request at info), and a field without 12 digit-like characters costs one short loop.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      formatters: { level: (label) => ({ level: label }), log: (object) => maskedForLine(object) as Record<string, unknown> },
      serializers: { msg: (message: unknown) => (typeof message === 'string' ? maskCardNumbers(message) : message) },
    },
    destination,
  );
}
