import { MAX_LISTED_FIELDS, type FieldProblem } from '../foundation/errors.js';

/**
 * Strict JSON for request bodies (D29), read at a cost linear in the body (D42). One pass over
 * the text, before `JSON.parse`, finds what `JSON.parse` silently discards or would pay for:
 *
 * - nesting deeper than MAX_DEPTH: the pass stops at the first bracket past it, so a body of
 *   thousands of nested brackets costs 33 characters of reading and nothing else;
 * - a member name that appears twice in one object (JSON.parse keeps the last one),
 * - in an integer field, a number written with a fraction or an exponent (`1000.0`, `1e3`,
 *   `4503599627370497.5`, `99.99999999999999999`): JSON.parse turns several of them into valid
 *   looking integers the client never sent,
 * - in an integer field, a literal beyond 2^53 - 1, which JSON.parse rounds to a neighbour,
 * - an array or object with more than MAX_LISTED_FIELDS children beyond what its schema allows
 *   (`maxItems`; `maxProperties`; for a closed object, `additionalProperties: false`, the members
 *   it declares): the array or the object with `maxProperties` is one problem; a closed object's
 *   unknown members are each a problem, listed and counted like the others. Schema validation
 *   would otherwise build a problem and a field path for every item or member (issue 31: 7,900
 *   wrong items in a 16 KiB body cost 4-5x a flat body). Once the reader has refused a body,
 *   validation never runs; on a body it lets through, every container holds at most 20 children
 *   more than its schema allows, so validation's problems are bounded by the schema, not by the
 *   body. A few children too many are left to validation, which lists them with every other
 *   problem of the body.
 *
 * The pass keeps a stack of frames, one per open object or array, each holding its own schema
 * node (walked alongside from the route's body schema) and the name or index it is at. A path
 * string is built only for a problem that is reported, and only for the first MAX_LISTED_FIELDS
 * of them (the rest are counted). Nothing is cached, so no client text is ever a key.
 *
 * Why not a library: `lossless-json` accepts a repeated name when both values are equal and
 * reports no paths; `@humanwhocodes/momoa` (an AST with source ranges) costs 15-19 µs per
 * card body against about 3 µs for this pass; `JSON.parse`'s reviver with `context.source`
 * needs Node 22, and Node 20 is supported. The pass does not decide what valid JSON is:
 * `JSON.parse` runs after it, and its verdict on broken text comes first.
 */

export const MAX_DEPTH = 32;
export const TOO_DEEP = `nesting deeper than ${MAX_DEPTH} levels`;
export const NOT_AN_INTEGER = 'must be a JSON integer (no fraction or exponent)';
export const NOT_SAFE = 'must be a safe integer';
export const DUPLICATE = 'appears more than once';
export const FORBIDDEN_NAME = 'is not an allowed member name';
/** Validation's own words for the same problems, so a body reads the same whichever pass refused it. */
export const UNKNOWN_MEMBER = 'is not a known field';
export const tooManyItems = (maxItems: number): string => `must NOT have more than ${maxItems} items`;
export const tooManyMembers = (maxProperties: number): string => `must NOT have more than ${maxProperties} properties`;

export class StrictJsonError extends Error {
  /** `fields`: the first MAX_LISTED_FIELDS problems; `omitted`: how many more were found. */
  constructor(
    readonly fields: FieldProblem[],
    readonly omitted = 0,
  ) {
    super('strict JSON');
    this.name = 'StrictJsonError';
  }
}

/** The part of a JSON schema the pass walks: where integers are, below which names and items. */
export interface SchemaNode {
  type?: unknown;
  properties?: Record<string, SchemaNode>;
  patternProperties?: Record<string, SchemaNode>;
  additionalProperties?: unknown;
  items?: unknown;
  maxItems?: unknown;
  maxProperties?: unknown;
}

/** What one pass cost and found: tests and the benchmark read the cost as counts, never as time. */
export interface ScanReport {
  problems: FieldProblem[];
  /** Problems found beyond the listed ones. */
  omitted: number;
  /** The deepest nesting reached; MAX_DEPTH + 1 when the pass stopped there. */
  depth: number;
  /** Characters the pass read (each at most a small constant number of times), path segments written included. */
  work: number;
}

interface Frame {
  array: boolean;
  /** This object's or array's own schema node. */
  schema: SchemaNode | undefined;
  /** The schema of the value being read now: the current member's, or the items'. */
  value: SchemaNode | undefined;
  /** Member names seen so far (objects only, made at the first name). */
  names: Set<string> | undefined;
  /** The current member name or array index. */
  at: string | number;
  /** Children this container may have (maxItems, maxProperties, or a closed object's declared members); undefined: unbounded. */
  limit: number | undefined;
  /** The container has more children than `limit`: refused once, its unknown members named from then on. */
  overflow: boolean;
}

const isDigit = (code: number) => code >= 48 && code <= 57;
const asNode = (value: unknown): SchemaNode | undefined => (value !== null && typeof value === 'object' ? (value as SchemaNode) : undefined);

/** The schema of member `name` of an object whose schema is `node` (own properties only: `constructor` is client text too). */
function memberSchema(node: SchemaNode | undefined, name: string): SchemaNode | undefined {
  if (!node) return undefined;
  if (node.properties && Object.hasOwn(node.properties, name)) return node.properties[name];
  if (node.patternProperties) {
    for (const pattern in node.patternProperties) return node.patternProperties[pattern];
  }
  return asNode(node.additionalProperties);
}

const isCount = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;

/** Whether `node` is an object schema that takes only the members it declares. */
const isClosed = (node: SchemaNode | undefined): boolean => node?.additionalProperties === false && node.patternProperties === undefined;

/** How many children a container of schema `node` may have; undefined when the schema does not bound it. */
function childLimit(node: SchemaNode | undefined, array: boolean): number | undefined {
  if (!node) return undefined;
  if (array) return isCount(node.maxItems) ? node.maxItems : undefined;
  if (isCount(node.maxProperties)) return node.maxProperties;
  return isClosed(node) ? Object.keys(node.properties ?? {}).length : undefined;
}

/** Past how many children the reader refuses the container itself: what the schema allows, and MAX_LISTED_FIELDS more. */
const OVERFLOW_MARGIN = MAX_LISTED_FIELDS;

/** A member the closed object of schema `node` does not declare. */
const isUnknown = (node: SchemaNode | undefined, name: string): boolean => isClosed(node) && !(node?.properties && Object.hasOwn(node.properties, name));

/** Problems with the text of a number literal in an integer field, or undefined when it is fine. */
function integerProblem(text: string, start: number, end: number): string | undefined {
  for (let i = start; i < end; i += 1) {
    const code = text.charCodeAt(i);
    if (code === 46 || code === 101 || code === 69) return NOT_AN_INTEGER;
  }
  return Number.isSafeInteger(Number(text.slice(start, end))) ? undefined : NOT_SAFE;
}

/**
 * One pass over `text` with the body schema `schema`: the problems D29 names, or the nesting
 * refusal of D42 (then the pass stopped at the bracket that went too deep). Never throws for
 * text that is not JSON (that is `JSON.parse`'s to say, after); a member name with a broken
 * escape is a SyntaxError.
 */
export function scanStrictJson(text: string, schema?: SchemaNode): ScanReport {
  const problems: FieldProblem[] = [];
  let omitted = 0;
  const stack: Frame[] = [];
  let depth = 0;
  let deepest = 0;
  let work = 0;
  // After `{` or `,` inside an object the next string is a member name.
  let expectName = false;
  const length = text.length;

  /**
   * Reports a problem at the value the pass is at; with `frames`, at the container of that depth
   * (the array or object itself), with `name`, at that member of the innermost object.
   */
  const report = (message: string, frames = stack.length, name?: string): void => {
    if (problems.length >= MAX_LISTED_FIELDS) {
      omitted += 1;
      return;
    }
    // `config.tolerance.percentage`, `config.allowedCategories[2]`: how error details name a field.
    let path = '';
    for (let f = 0; f < frames; f += 1) {
      work += 1;
      const frame = stack[f]!;
      const at = name !== undefined && f === frames - 1 ? name : frame.at;
      if (typeof at === 'number') path += `[${at}]`;
      else path += path === '' ? at : `.${at}`;
    }
    problems.push({ path: path === '' ? '(body)' : path, message });
  };

  /** A closed object past its declared members: each unknown member named, those seen so far at once. */
  const overflowMembers = (frame: Frame): void => {
    frame.overflow = true;
    if (!isClosed(frame.schema)) {
      report(tooManyMembers(frame.limit!), stack.length - 1);
      return;
    }
    // Every unknown member so far (more than MAX_LISTED_FIELDS of them), named in the order read.
    for (const seen of frame.names!) {
      work += 1;
      if (isUnknown(frame.schema, seen)) report(UNKNOWN_MEMBER, stack.length, seen);
    }
  };

  let i = 0;
  while (i < length) {
    work += 1;
    const code = text.charCodeAt(i);
    if (code === 34 /* " */) {
      // The closing quote is the first one not escaped: an odd run of backslashes escapes it.
      // Each run is counted once, by the quote that follows it, so this stays linear.
      let end = length;
      for (let from = i + 1; from < length;) {
        const quote = text.indexOf('"', from);
        if (quote < 0) break;
        let backslashes = 0;
        for (let j = quote - 1; j > i && text.charCodeAt(j) === 92; j -= 1) backslashes += 1;
        work += backslashes;
        if (backslashes % 2 === 0) {
          end = quote + 1;
          break;
        }
        from = quote + 1;
      }
      work += end - i;
      const frame = stack[stack.length - 1];
      if (expectName && frame !== undefined && !frame.array) {
        const raw = text.slice(i + 1, end - 1);
        const name = raw.includes('\\') ? (JSON.parse(text.slice(i, end)) as string) : raw;
        work += raw.length;
        frame.at = name;
        frame.value = memberSchema(frame.schema, name);
        frame.names ??= new Set();
        if (frame.overflow) {
          // Refused already: its further members are only counted (an unknown one is a problem),
          // not remembered, so a flood of names costs no growing set.
          if (isUnknown(frame.schema, name)) report(UNKNOWN_MEMBER);
        } else if (frame.names.has(name)) report(DUPLICATE);
        else {
          frame.names.add(name);
          if (frame.limit !== undefined && frame.names.size > frame.limit + OVERFLOW_MARGIN) overflowMembers(frame);
        }
        if (name === '__proto__') report(FORBIDDEN_NAME);
        expectName = false;
      }
      i = end;
      continue;
    }
    if (code === 123 /* { */ || code === 91 /* [ */) {
      depth += 1;
      if (depth > deepest) deepest = depth;
      if (depth > MAX_DEPTH) {
        // Before anything else is read or built: the refusal names the limit, not a path.
        return { problems: [{ path: '(body)', message: TOO_DEEP }], omitted: 0, depth, work };
      }
      const parent = stack[stack.length - 1];
      const own = parent === undefined ? schema : parent.value;
      const array = code === 91;
      stack.push({
        array,
        schema: own,
        value: array ? asNode(own?.items) : undefined,
        names: undefined,
        at: array ? 0 : '',
        limit: childLimit(own, array),
        overflow: false,
      });
      expectName = !array;
    } else if (code === 125 /* } */ || code === 93 /* ] */) {
      if (stack.pop() !== undefined) depth -= 1;
      expectName = false;
    } else if (code === 44 /* , */) {
      const frame = stack[stack.length - 1];
      if (frame !== undefined && !frame.array) expectName = true;
      else if (frame !== undefined) {
        frame.at = (frame.at as number) + 1;
        // The item after this comma is MAX_LISTED_FIELDS + 1 past maxItems: the array is refused, once.
        if (!frame.overflow && frame.limit !== undefined && frame.at >= frame.limit + OVERFLOW_MARGIN) {
          frame.overflow = true;
          report(tooManyItems(frame.limit), stack.length - 1);
        }
      }
    } else if (code === 45 /* - */ || isDigit(code)) {
      let end = i + 1;
      while (end < length) {
        const c = text.charCodeAt(end);
        if (isDigit(c) || c === 46 || c === 101 || c === 69 || c === 43 || c === 45) end += 1;
        else break;
      }
      work += end - i - 1;
      const frame = stack[stack.length - 1];
      const field = frame === undefined ? schema : frame.value;
      if (field?.type === 'integer') {
        work += end - i;
        const problem = integerProblem(text, i, end);
        if (problem) report(problem);
      }
      i = end;
      continue;
    }
    i += 1;
  }
  return { problems, omitted, depth: deepest, work };
}

/**
 * Parses a request body strictly: StrictJsonError for nesting past MAX_DEPTH (before JSON.parse
 * runs), SyntaxError for text that is not JSON, StrictJsonError (with field paths) for duplicate
 * names, lossy numbers or `__proto__`. `observe` sees what the pass cost (tests, benchmark).
 */
export function parseStrictJson(text: string, schema?: SchemaNode, observe?: (report: ScanReport) => void): unknown {
  const report = scanStrictJson(text, schema);
  observe?.(report);
  if (report.depth > MAX_DEPTH) throw new StrictJsonError(report.problems);
  const value: unknown = JSON.parse(text);
  if (report.problems.length > 0) throw new StrictJsonError(report.problems, report.omitted);
  return value;
}
