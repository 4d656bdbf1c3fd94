/**
 * JSON bodies of a given size in the shapes that once cost the strict reader super-linear time
 * (issue 16, D42), and a flat body of the same size to compare them with. Shared by the
 * hostile-body benchmark (`npm run bench -- --hostile`) and the tests that assert their cost.
 * Each text is at most `bytes` long and within a few bytes of it.
 */

export type BodyShape = 'flat' | 'deep-arrays' | 'deep-objects' | 'duplicate-names' | 'deep-duplicate-names' | 'numbers' | 'long-names' | 'escaped-names';

export const BODY_SHAPES: readonly BodyShape[] = [
  'flat',
  'deep-arrays',
  'deep-objects',
  'duplicate-names',
  'deep-duplicate-names',
  'numbers',
  'long-names',
  'escaped-names',
];

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
  }
}
