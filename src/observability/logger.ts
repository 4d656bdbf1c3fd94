import { pino, type DestinationStream, type Logger } from 'pino';

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

/**
 * Where the service's own log lines go (stdout, or a file): asynchronous, in batches of 4 KiB
 * flushed at least every second, so logging costs one write per batch instead of one per line
 * (perf-notes.md). Lines of the last second can be lost in a crash; the audit trail, which
 * must not lose lines, has its own unbatched sink (audit.ts).
 */
export function createLogDestination(dest: number | string): DestinationStream & { flushSync(): void } {
  const destination = pino.destination({ dest, sync: false, minLength: 4096, mkdir: typeof dest === 'string' });
  const timer = setInterval(() => {
    try {
      destination.flush();
    } catch {
      // not yet open, or closed: nothing to flush
    }
  }, 1000);
  timer.unref();
  return destination;
}

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
}
