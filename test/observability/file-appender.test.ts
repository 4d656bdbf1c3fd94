import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FileAppender } from '../../src/observability/file-appender.js';
import { waitFor } from '../support/wait.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function scratchFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'appender-'));
  dirs.push(dir);
  return join(dir, 'audit.jsonl');
}

const contents = (file: string): string => readFileSync(file, 'utf8');
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe('the file appender gathers lines between writes (issue 34)', () => {
  it('writes the first line of a quiet spell at once, without waiting for the gather', async () => {
    const file = scratchFile();
    // A gather longer than the test's guard: the line must not wait for it.
    const appender = new FileAppender(file, { fsync: false, gatherMs: 60 * 60_000 });
    appender.append('first\n');
    await waitFor('the first line in the file', () => contents(file) === 'first\n');
    await appender.close();
  });

  it('keeps every line, in order, when lines keep coming while writes are in flight', async () => {
    const file = scratchFile();
    const appender = new FileAppender(file, { fsync: true, gatherMs: 1 });
    const expected: string[] = [];
    for (let turn = 0; turn < 50; turn += 1) {
      for (let i = 0; i < 4; i += 1) {
        const line = `line ${turn}.${i}\n`;
        expected.push(line);
        appender.append(line);
      }
      await nextTurn();
    }
    await appender.close();
    expect(contents(file)).toBe(expected.join(''));
  });

  it('close() writes the lines still gathering at once rather than waiting for the gather to end', async () => {
    const file = scratchFile();
    const appender = new FileAppender(file, { fsync: false, gatherMs: 60 * 60_000 });
    appender.append('first\n');
    await nextTurn();
    // Appended while the first line's write is in flight: it waits for the (hour-long) gather.
    appender.append('second\n');
    await waitFor('the first line in the file', () => contents(file) === 'first\n');
    await nextTurn();
    expect(contents(file)).toBe('first\n');
    await appender.close(60 * 60_000);
    expect(contents(file)).toBe('first\nsecond\n');
  });
});
