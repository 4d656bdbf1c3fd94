import type { FieldProblem } from '../foundation/errors.js';

/**
 * Strict JSON for request bodies (D29). `JSON.parse` checks the grammar and builds the value;
 * a second, linear pass over the same text finds what `JSON.parse` silently discards:
 *
 * - a member name that appears twice in one object (JSON.parse keeps the last one),
 * - in an integer field, a number written with a fraction or an exponent (`1000.0`, `1e3`,
 *   `4503599627370497.5`, `99.99999999999999999`): JSON.parse turns several of them into valid
 *   looking integers the client never sent,
 * - in an integer field, a literal beyond 2^53 - 1, which JSON.parse rounds to a neighbour.
 *
 * Why not a library: `lossless-json` accepts a repeated name when both values are equal and
 * reports no paths; `@humanwhocodes/momoa` (an AST with source ranges) costs 15-19 µs per
 * card body against about 3 µs for this pass; `JSON.parse`'s reviver with `context.source`
 * needs Node 22, and Node 20 is supported. The scan relies on `JSON.parse` having accepted the
 * text first, so it never has to decide what valid JSON is.
 */

export const NOT_AN_INTEGER = 'must be a JSON integer (no fraction or exponent)';
export const NOT_SAFE = 'must be a safe integer';
export const DUPLICATE = 'appears more than once';
export const FORBIDDEN_NAME = 'is not an allowed member name';

export class StrictJsonError extends Error {
  constructor(readonly fields: FieldProblem[]) {
    super('strict JSON');
    this.name = 'StrictJsonError';
  }
}

/** A path segment: a member name or an array index. */
type Segment = string | number;

interface Frame {
  kind: 'object' | 'array';
  /** Member names seen so far (objects only). */
  names: Set<string> | undefined;
  /** The current member name or array index. */
  at: Segment;
}

const isDigit = (code: number) => code >= 48 && code <= 57;

/** `config.tolerance.percentage`, `config.allowedCategories[2]`: how error details name a field. */
function formatPath(segments: readonly Segment[]): string {
  let path = '';
  for (const segment of segments) {
    if (typeof segment === 'number') path += `[${segment}]`;
    else path += path === '' ? segment : `.${segment}`;
  }
  return path === '' ? '(body)' : path;
}

/** Index just past the closing quote of the string that starts at `start` (a `"`). */
function stringEnd(text: string, start: number): number {
  let i = start + 1;
  for (;;) {
    const quote = text.indexOf('"', i);
    // JSON.parse accepted the text, so a closing quote exists.
    let backslashes = 0;
    for (let j = quote - 1; j > start && text.charCodeAt(j) === 92; j -= 1) backslashes += 1;
    if (backslashes % 2 === 0) return quote + 1;
    i = quote + 1;
  }
}

function decodeName(text: string, start: number, end: number): string {
  const raw = text.slice(start + 1, end - 1);
  return raw.includes('\\') ? (JSON.parse(text.slice(start, end)) as string) : raw;
}

/** Problems with the text of a number literal in an integer field, or undefined when it is fine. */
function integerProblem(literal: string): string | undefined {
  for (let i = 0; i < literal.length; i += 1) {
    const code = literal.charCodeAt(i);
    if (code === 46 || code === 101 || code === 69) return NOT_AN_INTEGER;
  }
  return Number.isSafeInteger(Number(literal)) ? undefined : NOT_SAFE;
}

/** Whether the field at a path is an integer field (from the route's body schema). */
export type IntegerFieldTest = (path: readonly Segment[]) => boolean;

interface SchemaNode {
  type?: unknown;
  properties?: Record<string, SchemaNode>;
  patternProperties?: Record<string, SchemaNode>;
  additionalProperties?: unknown;
  items?: unknown;
}

/**
 * The integer fields of a JSON schema, as a test on paths. Only integer fields need their
 * spelling checked: a number anywhere else is already a type error the schema reports.
 */
export function integerFields(schema: unknown): IntegerFieldTest {
  const answers = new Map<string, boolean>();
  return (path) => {
    const key = path.join('\u0000');
    let answer = answers.get(key);
    if (answer === undefined) {
      let node = schema as SchemaNode | undefined;
      for (const segment of path) {
        if (!node) break;
        if (typeof segment === 'number') node = typeof node.items === 'object' ? (node.items as SchemaNode) : undefined;
        else
          node =
            node.properties?.[segment] ??
            (node.patternProperties ? Object.values(node.patternProperties)[0] : undefined) ??
            (typeof node.additionalProperties === 'object' ? (node.additionalProperties as SchemaNode) : undefined);
      }
      answer = node?.type === 'integer';
      // Paths come from the client: remember only a bounded number of answers.
      if (answers.size < 1024) answers.set(key, answer);
    }
    return answer;
  };
}

/**
 * Finds duplicate names, prototype-polluting names and, in integer fields, numbers not written
 * as safe JSON integers, in JSON text that JSON.parse accepted.
 */
function scanJson(text: string, isIntegerField: IntegerFieldTest = () => false): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const stack: Frame[] = [];
  const path = (last?: Segment): string => formatPath(last === undefined ? stack.map((f) => f.at) : [...stack.map((f) => f.at), last]);
  // After `{` or `,` inside an object the next string is a member name.
  let expectName = false;
  let i = 0;
  const length = text.length;
  while (i < length) {
    const code = text.charCodeAt(i);
    if (code === 34 /* " */) {
      const end = stringEnd(text, i);
      const frame = stack[stack.length - 1];
      if (expectName && frame?.kind === 'object') {
        const name = decodeName(text, i, end);
        frame.at = name;
        if (frame.names!.has(name)) problems.push({ path: path(), message: DUPLICATE });
        else frame.names!.add(name);
        if (name === '__proto__') problems.push({ path: path(), message: FORBIDDEN_NAME });
        expectName = false;
      }
      i = end;
      continue;
    }
    if (code === 123 /* { */) {
      stack.push({ kind: 'object', names: new Set(), at: '' });
      expectName = true;
    } else if (code === 91 /* [ */) {
      stack.push({ kind: 'array', names: undefined, at: 0 });
    } else if (code === 125 /* } */ || code === 93 /* ] */) {
      stack.pop();
    } else if (code === 44 /* , */) {
      const frame = stack[stack.length - 1];
      if (frame?.kind === 'object') expectName = true;
      else if (frame) frame.at = (frame.at as number) + 1;
    } else if (code === 45 /* - */ || isDigit(code)) {
      let end = i + 1;
      while (end < length) {
        const c = text.charCodeAt(end);
        if (isDigit(c) || c === 46 || c === 101 || c === 69 || c === 43 || c === 45) end += 1;
        else break;
      }
      const segments = stack.map((f) => f.at);
      const problem = isIntegerField(segments) ? integerProblem(text.slice(i, end)) : undefined;
      if (problem) problems.push({ path: formatPath(segments), message: problem });
      i = end;
      continue;
    }
    i += 1;
  }
  return problems;
}

/**
 * Parses a request body strictly: throws SyntaxError for text that is not JSON, and
 * StrictJsonError (with field paths) for duplicate names, lossy numbers or `__proto__`.
 */
export function parseStrictJson(text: string, isIntegerField?: IntegerFieldTest): unknown {
  const value: unknown = JSON.parse(text);
  const problems = scanJson(text, isIntegerField);
  if (problems.length > 0) throw new StrictJsonError(problems);
  return value;
}
