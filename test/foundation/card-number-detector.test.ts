import { describe, expect, it } from 'vitest';
import { cardNumberScanWork, containsCardNumber, maskCardNumbers } from '../../src/foundation/card-number-detector.js';

/**
 * D58, finding 4 of issue 31: the one detector of card numbers in free text. The review's
 * reasons reached the audit trail in clear through a regex of `\d` runs joined by single spaces
 * or dashes: every format below was missed, and 12-digit PANs were too short for it.
 */

/** A Visa test PAN (Luhn-valid), a 12-digit Luhn-valid number and a 19-digit one. */
const PAN16 = '4111111111111111';
const PAN12 = '123456789015';
const PAN19 = '4000000000000000006';

/** `digits` in another script: each ASCII digit shifted to the script's zero. */
const inScript = (digits: string, zero: number): string => [...digits].map((digit) => String.fromCodePoint(zero + Number(digit))).join('');
/** `digits` in groups of four joined by `separator`. */
const grouped = (digits: string, separator: string): string => digits.match(/.{1,4}/g)!.join(separator);

/** Every format of the review, and a few more of the same kinds. */
const FORMATS: [name: string, text: string][] = [
  ['plain', `card ${PAN16}`],
  ['spaces', `card ${grouped(PAN16, ' ')}`],
  ['dashes', `card ${grouped(PAN16, '-')}`],
  ['dots', `card ${grouped(PAN16, '.')}`],
  ['no-break spaces', `card ${grouped(PAN16, '\u00a0')}`],
  ['narrow no-break spaces', `card ${grouped(PAN16, '\u202f')}`],
  ['thin spaces', `card ${grouped(PAN16, '\u2009')}`],
  ['ideographic spaces', `card ${grouped(PAN16, '\u3000')}`],
  ['tabs', `card ${grouped(PAN16, '\t')}`],
  ['a newline', `card ${grouped(PAN16, '\n')}`],
  ['slashes', `card ${grouped(PAN16, '/')}`],
  ['double spaces', `card ${grouped(PAN16, '  ')}`],
  ['dash and space', `card ${grouped(PAN16, ' -')}`],
  ['underscores', `card ${grouped(PAN16, '_')}`],
  ['commas', `card ${grouped(PAN16, ',')}`],
  ['en dashes', `card ${grouped(PAN16, '\u2013')}`],
  ['minus signs', `card ${grouped(PAN16, '\u2212')}`],
  ['full-width hyphens', `card ${grouped(PAN16, '\uff0d')}`],
  ['zero-width spaces', `card ${grouped(PAN16, '\u200b')}`],
  ['zero-width joiners', `card ${[...PAN16].join('\u200d')}`],
  ['word joiners and soft hyphens', `card ${grouped(PAN16, '\u2060\u00ad')}`],
  ['byte order marks', `card ${grouped(PAN16, '\ufeff')}`],
  ['one separator between every digit', `card ${[...PAN16].join(' ')}`],
  ['full-width digits', `card ${inScript(PAN16, 0xff10)}`],
  ['full-width digits and spaces', `card ${grouped(inScript(PAN16, 0xff10), '\u3000')}`],
  ['Arabic-Indic digits', `card ${inScript(PAN16, 0x0660)}`],
  ['Arabic-Indic digits with Arabic thousands separators', `card ${grouped(inScript(PAN16, 0x0660), '\u066c')}`],
  ['extended Arabic-Indic digits', `card ${inScript(PAN16, 0x06f0)}`],
  ['Devanagari digits', `card ${inScript(PAN16, 0x0966)}`],
  ['mathematical bold digits (outside the BMP)', `card ${inScript(PAN16, 0x1d7ce)}`],
  ['mixed scripts', `card ${inScript(PAN16.slice(0, 8), 0xff10)}${inScript(PAN16.slice(8), 0x0660)}`],
  ['superscript digits (NFKC)', `card ${PAN16.slice(0, 12)}\u00b9\u00b9\u00b9\u00b9`],
  ['a 12-digit PAN', `card ${PAN12}`],
  ['a 12-digit PAN in groups', `card ${grouped(PAN12, ' ')}`],
  ['a 19-digit PAN', `card ${PAN19}`],
  ['glued to letters', `card${PAN16}x`],
  ['with its expiry after it', `card ${grouped(PAN16, ' ')} 12/26`],
  ['after another number', `ref 12 34 ${grouped(PAN16, ' ')}`],
  ['at the very start and end', PAN16],
  ['in JSON text', `{"note":"${PAN16}"}`],
];

/** Decimal digits in `text` after NFKC, as ASCII: what a reader could take from it. */
const digitsOf = (text: string): string =>
  [...text.normalize('NFKC')]
    .filter((char) => /\p{Nd}/u.test(char))
    .map((char) => {
      const code = char.codePointAt(0)!;
      let zero = code;
      while (/\p{Nd}/u.test(String.fromCodePoint(zero - 1))) zero -= 1;
      return String((code - zero) % 10);
    })
    .join('');

describe('the card-number detector (D58)', () => {
  it.each(FORMATS)('finds and masks a card number written %s, keeping its last four digits', (_name, text) => {
    expect(containsCardNumber(text)).toBe(true);
    const masked = maskCardNumbers(text);
    expect(containsCardNumber(masked)).toBe(false);
    const cardLength = text.includes(PAN12) || text.includes(grouped(PAN12, ' ')) ? 12 : text.includes(PAN19) ? 19 : 16;
    // At least every digit of the card number but its last four is hidden (digits around it may
    // be hidden too, when they could be part of another one), and the last four stay readable.
    expect(digitsOf(masked).length).toBeLessThanOrEqual(digitsOf(text).length - (cardLength - 4));
    expect(digitsOf(masked)).toContain({ 12: PAN12, 16: PAN16, 19: PAN19 }[cardLength]!.slice(-4));
  });

  it('masks every digit but the last four, in place: separators and other text stay, the length in characters too', () => {
    expect(maskCardNumbers(`card ${grouped(PAN16, ' ')} please`)).toBe('card **** **** **** 1111 please');
    expect(maskCardNumbers(`a ${grouped(PAN16, '.')} b ${PAN12}`)).toBe('a ****.****.****.1111 b ********9015');
    expect(maskCardNumbers(`${grouped(PAN16, ' ')} 12/26`)).toBe('**** **** **** 1111 12/26');
    expect(maskCardNumbers(inScript(PAN16, 0x0660))).toBe(`${'*'.repeat(12)}${inScript('1111', 0x0660)}`);
    // Outside the BMP a digit is two UTF-16 units; it becomes one star.
    expect(maskCardNumbers(inScript(PAN16, 0x1d7ce))).toBe(`${'*'.repeat(12)}${inScript('1111', 0x1d7ce)}`);
    expect(maskCardNumbers('nothing here')).toBe('nothing here');
  });

  it('where two card numbers overlap in one run, shows only digits that are among the last four of each', () => {
    // 4111111111111111 and 1111111111111111 2 would overlap; a run of two numbers side by side:
    const text = `${grouped(PAN16, ' ')} ${grouped('5555555555554444', ' ')}`;
    const masked = maskCardNumbers(text);
    expect(containsCardNumber(masked)).toBe(false);
    expect(masked.endsWith('4444')).toBe(true);
    expect(digitsOf(masked).length).toBeLessThanOrEqual(8);
  });

  it.each([
    ['a Luhn-invalid 16-digit number', '4111111111111112'],
    ['11 digits, Luhn-valid', '12345678903'],
    ['20 digits in one group', '41111111111111111111'],
    ['three separators between groups', `4111   1111   1111   1111`],
    ['a letter between groups', '4111 1111 x 1111 1111'],
    ['a colon between groups', '4111:1111:1111:1111'],
    ['an ISO timestamp', '2026-11-22T12:00:00.000Z'],
    ['an amount', 'EUR 1,234,567.89'],
    ['text with no digits', 'card details shared by mistake'],
    ['an empty string', ''],
  ])('leaves %s alone', (_name, text) => {
    expect(containsCardNumber(text)).toBe(false);
    expect(maskCardNumbers(text)).toBe(text);
  });

  it('finds no card number in 10,000 random booking-reference-like strings', () => {
    const random = seeded(20261122);
    const upper = 'ABCDEFGHJKLMNPQRSTUVWXYZ';
    const alnum = `${upper}23456789`;
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    const chars = (from: string, length: number) => Array.from({ length }, () => pick([...from])).join('');
    const digits = (length: number) => chars('0123456789', length);
    const pad = (value: number) => String(value).padStart(2, '0');
    const date = () => `20${pad(24 + Math.floor(random() * 4))}-${pad(1 + Math.floor(random() * 12))}-${pad(1 + Math.floor(random() * 28))}`;
    const parts: (() => string)[] = [
      () => `PNR ${chars(alnum, 6)}`,
      () => chars(alnum, 6),
      () => `BK-${digits(8)}`,
      () => `booking ${chars(upper, 2)}${digits(6)}`,
      () => `flight ${chars(upper, 2)} ${digits(4)}`,
      () => `hotel conf. ${digits(9)}`,
      () => `check-in ${date()}`,
      () => `${date()} to ${date()}`,
      () => `at ${pad(Math.floor(random() * 24))}:${pad(Math.floor(random() * 60))}`,
      () => `EUR ${digits(1)},${digits(3)}.${digits(2)}`,
      () => `room ${digits(3)}, ${digits(1)} nights`,
      () => `cost center CC-${digits(4)}`,
      () => `trip ${chars(alnum, 3)}-${digits(4)}-${chars(upper, 2)}`,
      () => `invoice INV/${digits(4)}/${digits(5)}`,
      () => `seat ${digits(2)}${chars('ABCDEF', 1)}`,
    ];
    const refs = Array.from({ length: 10_000 }, () =>
      Array.from({ length: 1 + Math.floor(random() * 4) }, () => pick(parts)()).join(pick([' / ', '; ', ' and ', ' - '])),
    );
    expect(refs.filter((ref) => containsCardNumber(ref))).toEqual([]);
    expect(refs.filter((ref) => maskCardNumbers(ref) !== ref)).toEqual([]);
  });

  it('costs work linear in the text: each character read once, each digit visited at most 19 times by the checks', () => {
    const worst = [
      // One-digit groups: every group starts candidates that run 19 groups on.
      '1 '.repeat(50_000),
      '4111 '.repeat(20_000),
      // Long groups: no candidate at all.
      '1234567890'.repeat(10_000),
      // Digits outside ASCII, separators of every kind.
      `${inScript('1234', 0x0660)}\u200b\u00a0`.repeat(10_000),
      `${grouped(PAN16, '\u2009')} `.repeat(5_000),
    ];
    for (const text of worst) {
      const work = cardNumberScanWork(text);
      expect(work.read).toBe(text.length);
      expect(work.visited).toBeLessThanOrEqual(19 * text.length);
    }
    // Twice the text, at most twice the work.
    const once = cardNumberScanWork('1 '.repeat(10_000)).visited;
    const twice = cardNumberScanWork('1 '.repeat(20_000)).visited;
    expect(twice).toBeLessThanOrEqual(2 * once + 19 * 19);
  });
});

/** A small deterministic generator (mulberry32): the same 10,000 strings on every run. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
