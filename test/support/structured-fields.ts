/**
 * A strict parser for the part of RFC 8941 (Structured Field Values for HTTP) that the
 * rate-limit headers of draft-ietf-httpapi-ratelimit-headers use: a List of Items whose bare
 * items are Strings, Tokens, Integers or Booleans, each with Parameters. It follows the RFC's
 * parsing algorithms (section 4.2) and throws on anything they would fail, including the parts
 * of the RFC outside this subset (Inner Lists, Decimals, Byte Sequences): a header the test
 * parses is one a conforming client parses the same way.
 */

export type BareItem = { type: 'string' | 'token'; value: string } | { type: 'integer'; value: number } | { type: 'boolean'; value: boolean };

export interface Item {
  bare: BareItem;
  parameters: Map<string, BareItem>;
}

class Input {
  position = 0;
  constructor(readonly text: string) {}
  /** The next character (a method, not a getter: TypeScript would narrow a getter across moves). */
  next(): string | undefined {
    return this.text[this.position];
  }
  get done(): boolean {
    return this.position >= this.text.length;
  }
  fail(problem: string): never {
    throw new SyntaxError(`structured field: ${problem} at ${this.position} of ${JSON.stringify(this.text)}`);
  }
  skip(pattern: RegExp): void {
    while (!this.done && pattern.test(this.next()!)) this.position += 1;
  }
}

const DIGIT = /^[0-9]$/;
const TCHAR_OR_COLON_SLASH = /^[!#$%&'*+\-.^_`|~0-9A-Za-z:/]$/;
const KEY_REST = /^[a-z0-9_\-.*]$/;

function parseInteger(input: Input): BareItem {
  let sign = 1;
  if (input.next() === '-') {
    sign = -1;
    input.position += 1;
  }
  if (input.done || !DIGIT.test(input.next()!)) input.fail('an integer needs a digit');
  const start = input.position;
  input.skip(DIGIT);
  if (input.next() === '.') input.fail('a Decimal (not part of this subset)');
  const digits = input.text.slice(start, input.position);
  if (digits.length > 15) input.fail('an integer of more than 15 digits');
  return { type: 'integer', value: sign * Number(digits) };
}

function parseString(input: Input): BareItem {
  input.position += 1; // the opening DQUOTE
  let value = '';
  for (;;) {
    if (input.done) input.fail('an unterminated string');
    const char = input.next()!;
    input.position += 1;
    if (char === '\\') {
      if (input.done) input.fail('a string ending in a backslash');
      const escaped = input.next()!;
      if (escaped !== '"' && escaped !== '\\') input.fail(`a backslash before ${JSON.stringify(escaped)}`);
      value += escaped;
      input.position += 1;
    } else if (char === '"') {
      return { type: 'string', value };
    } else if (char < '\x20' || char > '\x7e') {
      input.fail('a character a string may not hold');
    } else {
      value += char;
    }
  }
}

function parseBareItem(input: Input): BareItem {
  const char = input.next();
  if (char === undefined) return input.fail('an item is missing');
  if (char === '-' || DIGIT.test(char)) return parseInteger(input);
  if (char === '"') return parseString(input);
  if (/^[A-Za-z*]$/.test(char)) {
    const start = input.position;
    input.position += 1;
    input.skip(TCHAR_OR_COLON_SLASH);
    return { type: 'token', value: input.text.slice(start, input.position) };
  }
  if (char === '?') {
    input.position += 1;
    const value = input.next();
    if (value !== '0' && value !== '1') input.fail('a boolean is ?0 or ?1');
    input.position += 1;
    return { type: 'boolean', value: value === '1' };
  }
  if (char === '(') input.fail('an Inner List (not part of this subset)');
  if (char === ':') input.fail('a Byte Sequence (not part of this subset)');
  return input.fail(`an item cannot start with ${JSON.stringify(char)}`);
}

function parseParameters(input: Input): Map<string, BareItem> {
  const parameters = new Map<string, BareItem>();
  while (input.next() === ';') {
    input.position += 1;
    input.skip(/^ $/);
    const start = input.position;
    if (input.done || !/^[a-z*]$/.test(input.next()!)) input.fail('a parameter key starts with a lower-case letter or *');
    input.position += 1;
    input.skip(KEY_REST);
    const key = input.text.slice(start, input.position);
    let value: BareItem = { type: 'boolean', value: true };
    if (input.next() === '=') {
      input.position += 1;
      value = parseBareItem(input);
    }
    parameters.set(key, value);
  }
  return parameters;
}

/** The members of a List, as RFC 8941 section 4.2.1 parses one; throws SyntaxError where it fails. */
export function parseList(field: string): Item[] {
  const input = new Input(field);
  input.skip(/^ $/);
  const items: Item[] = [];
  while (!input.done) {
    const bare = parseBareItem(input);
    items.push({ bare, parameters: parseParameters(input) });
    input.skip(/^[ \t]$/);
    if (input.done) break;
    if (input.next() !== ',') input.fail('members are separated by a comma');
    input.position += 1;
    input.skip(/^[ \t]$/);
    if (input.done) input.fail('a trailing comma');
  }
  return items;
}
