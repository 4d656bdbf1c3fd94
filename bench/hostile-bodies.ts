/**
 * JSON bodies of a given size in the shapes that once cost the strict reader super-linear time
 * (issue 16, D42) or made schema validation build a problem for every value (issue 31, finding 2),
 * and a flat body of the same size to compare them with. Shared by the hostile-body benchmark
 * (`npm run bench -- --hostile`) and the tests that assert their cost. Each text is at most
 * `bytes` long and within a few bytes of it.
 */

export type BodyShape =
  | 'flat'
  | 'deep-arrays'
  | 'deep-objects'
  | 'duplicate-names'
  | 'deep-duplicate-names'
  | 'numbers'
  | 'long-names'
  | 'escaped-names'
  | 'failing-items'
  | 'unknown-members'
  | 'failing-values';

export const BODY_SHAPES: readonly BodyShape[] = [
  'flat',
  'deep-arrays',
  'deep-objects',
  'duplicate-names',
  'deep-duplicate-names',
  'numbers',
  'long-names',
  'escaped-names',
  'failing-items',
  'unknown-members',
  'failing-values',
];

/** The shapes each of whose values fails the card schema: validation once built a problem, and a field path, for every one. */
export const FAILING_SHAPES: readonly BodyShape[] = ['failing-items', 'unknown-members', 'failing-values'];

/** A valid card request's members, before the part a shape fills (a fixed requestId: these bodies never create a card). */
const CARD_HEAD = '"requestId":"0b8e2d3c-5f4a-4c1e-9a7b-2f6d8e1c3a5b","cardLimit":1000,"currency":"EUR"';

/** `{"<name>":` opened `levels` times around `inner`. */
const nested = (levels: number, inner: string, name = 'a') => `${`{"${name}":`.repeat(levels)}${inner}${'}'.repeat(levels)}`;

/** `open`, then `item` joined by commas as often as fits in `bytes`, then `close`. */
function repeated(bytes: number, open: string, item: string, close: string): string {
  const count = Math.max(1, Math.floor((bytes - open.length - close.length + 1) / (item.length + 1)));
  return `${open}${Array.from({ length: count }, () => item).join(',')}${close}`;
}

export function hostileBody(shape: BodyShape, bytes: number): string {
  switch (shape) {
    case 'flat': {
      // Distinct short members with short string values: ordinary JSON.
      const members: string[] = [];
      let size = 2;
      for (let i = 0; ; i += 1) {
        const member = `"k${i}":"value-${i % 10}"`;
        if (size + member.length + 1 > bytes) break;
        members.push(member);
        size += member.length + 1;
      }
      return `{${members.join(',')}}`;
    }
    case 'deep-arrays': {
      // A number at every level: the old reader copied the whole nesting path for each one.
      const levels = Math.floor((bytes - 1) / 4);
      return `${'[1,'.repeat(levels)}1${']'.repeat(levels)}`;
    }
    case 'deep-objects': {
      // A repeated name at every level: the old reader built a path string for each one.
      const levels = Math.floor((bytes - 1) / 12);
      return `${'{"a":1,"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
    }
    case 'duplicate-names':
      // One integer field of the card schema, over and over: a duplicate and an integer check each.
      return repeated(bytes, '{', '"cardLimit":1', '}');
    case 'deep-duplicate-names':
      // The same at the deepest nesting allowed, where every problem's path is longest.
      return nested(31, repeated(bytes - 31 * 6, '{', '"a":1', '}'));
    case 'numbers':
      return repeated(bytes, '[', '-1234567.5e+10', ']');
    case 'long-names':
      return `{"${'n'.repeat(Math.max(1, bytes - 6))}":1}`;
    case 'escaped-names':
      // A name spelt entirely in \u escapes, then a second member repeating it.
      return repeated(bytes, '{', `"${'\\u006e'.repeat(Math.max(1, Math.floor((bytes - 8) / 2 / 6)))}":1`, '}');
    case 'failing-items':
      // The review's shape: a card whose allowedCategories holds thousands of numbers where
      // strings are wanted (two bytes an item, each a type problem, far past maxItems).
      return repeated(bytes, `{${CARD_HEAD},"config":{"allowedCategories":[`, '1', ']}}');
    case 'unknown-members':
      // As many distinct unknown members as fit, with the shortest names: a problem every 6-8 bytes.
      return members(bytes, '{', (i) => `"${i.toString(36)}":0`, '}');
    case 'failing-values':
      // Metadata whose values are numbers where strings are wanted, far past its 50 members.
      return members(bytes, `{${CARD_HEAD},"metadata":{`, (i) => `"${i.toString(36)}":0`, '}}');
  }
}

/** `open`, then distinct members `member(0)`, `member(1)`, ... joined by commas as long as they fit in `bytes`, then `close`. */
function members(bytes: number, open: string, member: (i: number) => string, close: string): string {
  const parts: string[] = [];
  let size = open.length + close.length;
  for (let i = 0; ; i += 1) {
    const next = member(i);
    if (size + next.length + (i > 0 ? 1 : 0) > bytes) break;
    parts.push(next);
    size += next.length + (i > 0 ? 1 : 0);
  }
  return `${open}${parts.join(',')}${close}`;
}
