import { describe, expect, it } from 'vitest';
import { BODY_SHAPES, hostileBody } from '../../bench/hostile-bodies.js';
import { CardRequestSchema } from '../../src/cards/card-schemas.js';
import { MAX_DEPTH, parseStrictJson, scanStrictJson, StrictJsonError, TOO_DEEP, type SchemaNode } from '../../src/edge/strict-json.js';

/**
 * D42: the strict reader's cost is linear in the body, counted (characters read, depth reached),
 * never timed. Before issue 16 a path was copied for every number and built for every name, so
 * the work per character grew with the nesting; a body of 4,096 nested arrays cost seconds.
 */

const SIZES = [16 * 1024, 1024 * 1024];
/** Characters read per character of body: each is read by the loop, and at most once more by a string or number. */
const WORK_PER_CHAR = 3;
const CARD = CardRequestSchema as SchemaNode;

describe('the strict JSON reader costs work linear in the body (D42)', () => {
  for (const bytes of SIZES) {
    for (const shape of BODY_SHAPES) {
      it(`${shape}, ${bytes} bytes: at most ${WORK_PER_CHAR} characters read per character`, () => {
        const text = hostileBody(shape, bytes);
        expect(text.length).toBeLessThanOrEqual(bytes);
        expect(text.length).toBeGreaterThan(bytes - 64);
        const report = scanStrictJson(text, CARD);
        expect(report.work, `${shape}: ${report.work} for ${text.length} characters`).toBeLessThanOrEqual(WORK_PER_CHAR * text.length);
        expect(report.problems.length).toBeLessThanOrEqual(20);
      });
    }
  }

  for (const shape of ['deep-arrays', 'deep-objects'] as const) {
    it(`${shape}: stops at the bracket that opens level ${MAX_DEPTH + 1}, whatever the size`, () => {
      for (const bytes of SIZES) {
        const text = hostileBody(shape, bytes);
        const report = scanStrictJson(text, CARD);
        expect(report.depth).toBe(MAX_DEPTH + 1);
        expect(report.problems).toEqual([{ path: '(body)', message: TOO_DEEP }]);
        // Read up to that bracket and no further: the same work at 16 KiB and at 1 MiB.
        let at = -1;
        for (let level = 0; level <= MAX_DEPTH; level += 1) at = text.indexOf(shape === 'deep-arrays' ? '[' : '{', at + 1);
        expect(report.work).toBeLessThanOrEqual(WORK_PER_CHAR * (at + 1));
      }
    });
  }

  it('takes 32 levels of nesting and refuses 33, arrays and objects alike', () => {
    for (const [open, close] of [
      ['[', ']'],
      ['{"a":', '}'],
    ]) {
      const at = (levels: number) => `${open!.repeat(levels)}1${close!.repeat(levels)}`;
      expect(scanStrictJson(at(MAX_DEPTH)).depth).toBe(MAX_DEPTH);
      expect(scanStrictJson(at(MAX_DEPTH)).problems).toEqual([]);
      expect(parseStrictJson(at(MAX_DEPTH))).toBeDefined();
      expect(scanStrictJson(at(MAX_DEPTH + 1)).depth).toBe(MAX_DEPTH + 1);
      expect(() => parseStrictJson(at(MAX_DEPTH + 1))).toThrow(StrictJsonError);
    }
    // Brackets inside strings are text, not nesting.
    expect(scanStrictJson(`["${'['.repeat(100)}"]`).depth).toBe(1);
  });

  it('refuses nesting before JSON.parse sees the text: deep broken JSON is a depth problem, not a syntax error', () => {
    const broken = `${'['.repeat(MAX_DEPTH + 1)}`;
    let thrown: unknown;
    try {
      parseStrictJson(broken);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(StrictJsonError);
    expect((thrown as StrictJsonError).fields).toEqual([{ path: '(body)', message: TOO_DEEP }]);
    // Shallow broken JSON is still JSON.parse's to refuse.
    expect(() => parseStrictJson('[[1,')).toThrow(SyntaxError);
    expect(() => parseStrictJson('{"a":1,"a":2')).toThrow(SyntaxError);
  });

  it('lists 20 duplicate names with their paths and counts the rest, at the deepest nesting allowed', () => {
    const text = hostileBody('deep-duplicate-names', 16 * 1024);
    const members = (text.match(/"a":1/g) ?? []).length;
    const report = scanStrictJson(text, CARD);
    expect(report.problems).toHaveLength(20);
    expect(report.problems[0]).toEqual({ path: `${'a.'.repeat(31)}a`, message: 'appears more than once' });
    // Every member but the first is a duplicate.
    expect(report.omitted).toBe(members - 1 - 20);
  });

  it('checks integer fields found by walking the schema, and nothing it does not know', () => {
    const report = scanStrictJson('{"cardLimit":1.0,"config":{"tolerance":{"percentage":1e2}},"metadata":{"x":1.5},"constructor":{"a":2.5}}', CARD);
    expect(report.problems).toEqual([
      { path: 'cardLimit', message: 'must be a JSON integer (no fraction or exponent)' },
      { path: 'config.tolerance.percentage', message: 'must be a JSON integer (no fraction or exponent)' },
    ]);
  });
});
