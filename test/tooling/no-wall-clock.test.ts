import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The rule of docs/testing.md, kept true: no test asserts a measured duration. A comparison
 * (`toBeLessThan`, `toBeGreaterThan`, `…OrEqual`) on something read from a clock
 * (`performance.now()`, `Date.now()`, `process.hrtime`, `process.cpuUsage`) or on a value named
 * like a measured time (`ms`, `…Ms`, `elapsed`, `took`, `…After`, `duration`, `started`,
 * `median`, `.ms`) fails this test, which lists every such line. Computed values (a backoff
 * delay, a rate window's reset on the injected clock, a TTL bound) are named in COMPUTED_NAME and
 * pass. A grep, not a proof: a helper that returns a duration under another name slips through,
 * so name measured values as above.
 */

const REPO = join(import.meta.dirname, '..', '..');
const ROOTS = ['test', 'client/test'];
const THIS_FILE = relative(REPO, import.meta.filename);

const COMPARISON = /\.(toBeLessThan|toBeGreaterThan|toBeLessThanOrEqual|toBeGreaterThanOrEqual)\(/;
/** Read from a clock. */
const CLOCK_READ = /performance\.now\(\)|Date\.now\(\)|process\.hrtime|cpuUsage\(/;
/** Names that hold a measured time: `ms`, `…Ms`, `elapsed…`, `took…`, `…After`, `started…`, a median or mean. */
const MEASURED_NAME =
  /(^|[^\w$])(ms|\w+Ms|elapsed\w*|\w*Elapsed\w*|took\w*|\w*Took\w*|\w+After(?![\w.])|duration\w*|\w*Duration\w*|started\w*|\w*Started\w*|median|mean\w*|\w*Mean\w*)\b|\.ms\b/;
/** Names of computed values, not measured ones (a backoff, a Retry-After, a window's reset, a TTL bound). */
const COMPUTED_NAME = /\b(delayMs|resetMs|maxMs|retryAfter|retryAfterMs|leaseMs|ttlMs)\b/g;

/** The argument of the first `expect(` on the line, up to its closing parenthesis (strings blanked). */
function expectedValue(line: string): string | undefined {
  const start = line.indexOf('expect(');
  if (start === -1) return undefined;
  const text = line.replace(/'(?:[^'\\]|\\.)*'|`(?:[^`\\]|\\.)*`|"(?:[^"\\]|\\.)*"/g, "''");
  const open = text.indexOf('expect(') + 'expect('.length;
  let depth = 1;
  for (let i = open; i < text.length; i += 1) {
    if (text[i] === '(') depth += 1;
    else if (text[i] === ')' && (depth -= 1) === 0) return text.slice(open, i);
  }
  return text.slice(open);
}

/** True when the line asserts a bound on a measured duration. */
export function assertsWallClock(line: string): boolean {
  if (!COMPARISON.test(line)) return false;
  const value = expectedValue(line);
  if (value === undefined) return false;
  return CLOCK_READ.test(value) || MEASURED_NAME.test(value.replace(COMPUTED_NAME, 'computed'));
}

function testSources(dir: string): string[] {
  const found: string[] = [];
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules') continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) found.push(...testSources(path));
    else if (name.endsWith('.ts')) found.push(path);
  }
  return found;
}

/**
 * The samples are written with `~` for the dot before the matcher, so that no line of this file
 * reads as a duration assertion to a text search over test/.
 */
const sample = (line: string): string => line.replace(')~to', ').to');

describe('no wall-clock assertions in the tests (docs/testing.md)', () => {
  it('recognises a duration assertion and leaves computed values alone', () => {
    for (const line of [
      'expect(performance.now() - started)~toBeLessThan(1500);',
      'expect(Date.now() - sentAt)~toBeGreaterThanOrEqual(70);',
      "expect(ms, 'a 504 within the deadline')~toBeLessThan(TIMEOUT_MS + SLACK_MS);",
      'expect(login.ms)~toBeLessThan(3000);',
      'expect(tookMs)~toBeLessThan(3000);',
      'expect(median(refused))~toBeLessThan(median(answered));',
      'expect(figures.at(-1)!.meanMs - figures[0]!.meanMs)~toBeLessThan(5);',
      'expect(elapsed)~toBeGreaterThan(900);',
      'expect(report.resumedMs!)~toBeLessThan(15_000);',
      'expect(freedAfter)~toBeLessThan(4_000);',
      'expect(attackMs)~toBeLessThanOrEqual(Math.max(3 * plainMs, 20));',
    ].map(sample))
      expect(assertsWallClock(line), line).toBe(true);
    for (const line of [
      'expect(retry.delayMs)~toBeLessThan(5_250);',
      'expect(refused.resetMs)~toBeLessThanOrEqual(60_000);',
      'expect(ttl)~toBeLessThanOrEqual(maxMs);',
      'expect(envelope.retryAfter)~toBeGreaterThanOrEqual(1);',
      'expect(report.problems.length)~toBeLessThanOrEqual(20);',
      'expect(memoryAfter.dataset - memoryBefore.dataset)~toBeLessThan(1024);',
      'expect(report.work)~toBeLessThanOrEqual(WORK_PER_CHAR * text.length);',
      "expect(value('gateway_store_command_duration_seconds_count', { operation }))~toBeGreaterThan(0);",
      'expect(performance.now() - started)~toBe(0);',
    ].map(sample))
      expect(assertsWallClock(line), line).toBe(false);
  });

  it('finds none in test/ and client/test/', () => {
    const offenders: string[] = [];
    for (const root of ROOTS) {
      for (const file of testSources(join(REPO, root))) {
        const path = relative(REPO, file);
        if (path === THIS_FILE) continue;
        readFileSync(file, 'utf8')
          .split('\n')
          .forEach((line, index) => {
            if (assertsWallClock(line)) offenders.push(`${path}:${index + 1}: ${line.trim()}`);
          });
      }
    }
    expect(offenders, 'assert an order, a count or an instant of the injected clock instead (docs/testing.md)').toEqual([]);
  });
});
