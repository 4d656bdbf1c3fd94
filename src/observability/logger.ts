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
