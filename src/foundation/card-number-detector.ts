/**
 * D58: the one detector of card numbers written into free text (a status change's reason, a
 * card id as a client typed it, metadata, any string a log or audit line carries).
 *
 * A PAN-shaped value is 12 to 19 digits that pass the Luhn check. A digit is any Unicode decimal
 * digit after NFKC normalisation (ASCII, full-width, Arabic-Indic, superscripts, ...). Between
 * two digits may stand at most two separator characters: a space of any kind (tab, no-break,
 * thin, ideographic, ...), a dot, a dash, a slash, an underscore, a comma, or a zero-width
 * character. Anything else (a letter, a colon, three separators in a row) ends the number.
 *
 * The text is read as runs: digits in groups, joined by short separators. A card number is a
 * sequence of whole consecutive groups of a run (`4111 1111 1111 1111 12/26` holds one, its
 * expiry after it), so a card number with other digits before or after it in the same run is
 * still found. Each group starts at most 19 candidates (a candidate never has more than 19
 * digits) and the Luhn sums of a candidate grow group by group, so the whole pass is linear in
 * the text. Nothing is cached and nothing is built for text with fewer than 12 characters that
 * could be digits (the fast path every log value takes).
 */

/** The fewest digits a card number has (ISO/IEC 7812 allows 8; D58 takes 12 and more). */
const MIN_DIGITS = 12;
const MAX_DIGITS = 19;
/** Separator characters that may stand between two digits of one number. */
const MAX_SEPARATORS = 2;

const SEPARATOR = -1;
const OTHER = -2;

/** ASCII classes: a digit's value, SEPARATOR or OTHER, by char code. */
const ASCII = new Int8Array(128).fill(OTHER);
for (let code = 48; code <= 57; code += 1) ASCII[code] = code - 48;
for (const separator of ' \t\n\r\v\f.-/_,') ASCII[separator.charCodeAt(0)] = SEPARATOR;

const DECIMAL_DIGIT = /^\p{Nd}$/u;
const SPACE_OR_DASH = /^[\p{Zs}\p{Pd}\s]$/u;
/**
 * Separators NFKC leaves as they are: zero-width characters (space, joiners, word joiner, byte
 * order mark, soft hyphen, Mongolian vowel separator), the minus sign and other slashes and dots,
 * Arabic commas and separators (beside Arabic-Indic digits).
 */
const OTHER_SEPARATORS = new Set([
  0x200b, 0x200c, 0x200d, 0x2060, 0xfeff, 0x00ad, 0x180e, 0x2212, 0x2044, 0x2215, 0x00b7, 0x2022, 0x2027, 0x060c, 0x066b, 0x066c, 0x3001, 0x3002,
]);

/**
 * The value of a decimal digit outside ASCII: Unicode assigns decimal digits only in contiguous
 * runs of 0 to 9 (its stability policy), so a digit's value is its distance from the start of its
 * run, modulo 10. At most a few dozen steps back, for a character that is one.
 */
function decimalValue(codePoint: number): number {
  let start = codePoint;
  while (start > 0 && DECIMAL_DIGIT.test(String.fromCodePoint(start - 1))) start -= 1;
  return (codePoint - start) % 10;
}

/** A digit's value (0 to 9), SEPARATOR or OTHER, for a code point outside ASCII. */
function classifyWide(codePoint: number): number {
  if (OTHER_SEPARATORS.has(codePoint)) return SEPARATOR;
  const text = String.fromCodePoint(codePoint);
  if (DECIMAL_DIGIT.test(text)) return decimalValue(codePoint);
  if (SPACE_OR_DASH.test(text)) return SEPARATOR;
  // Full-width digits are decimal digits already; superscripts, circled digits and full-width
  // punctuation become one ASCII character under NFKC.
  const normal = text.normalize('NFKC');
  if (normal.length !== 1) return OTHER;
  const code = normal.charCodeAt(0);
  if (code < 128) return ASCII[code]!;
  return SPACE_OR_DASH.test(normal) || OTHER_SEPARATORS.has(code) ? SEPARATOR : OTHER;
}

/** Whether the text has at least MIN_DIGITS characters that could be digits: the fast path. */
function mayHoldCardNumber(text: string): boolean {
  const length = text.length;
  if (length < MIN_DIGITS) return false;
  let candidates = 0;
  for (let i = 0; i < length; i += 1) {
    const code = text.charCodeAt(i);
    if ((code >= 48 && code <= 57) || code >= 128) {
      candidates += 1;
      if (candidates >= MIN_DIGITS) return true;
    }
  }
  return false;
}

const DOUBLED = [0, 2, 4, 6, 8, 1, 3, 5, 7, 9];

/**
 * One run of digits read so far: each digit's value and where it sits in the text (code unit
 * index and width), and where each group of digits starts. Reused from run to run.
 */
class Run {
  /** Digits visited by the candidates' checks: what the pass costs beyond reading the text. */
  work = 0;
  values: number[] = [];
  at: number[] = [];
  width: number[] = [];
  groupStarts: number[] = [];

  reset(): void {
    this.values.length = 0;
    this.at.length = 0;
    this.width.length = 0;
    this.groupStarts.length = 0;
  }

  /**
   * Calls `found(first, end)` for each card number of this run, as digit indices [first, end),
   * in order of their first group; returns true as soon as `found` does.
   */
  cardNumbers(found: (first: number, end: number) => boolean): boolean {
    const { values, groupStarts } = this;
    const digits = values.length;
    if (digits < MIN_DIGITS) return false;
    const groups = groupStarts.length;
    for (let g = 0; g < groups; g += 1) {
      const first = groupStarts[g]!;
      // Luhn sums of the candidate, doubling even positions (evenSum) or odd ones (oddSum),
      // counted from its first digit: its length picks the one the check uses.
      let evenSum = 0;
      let oddSum = 0;
      for (let h = g; h < groups; h += 1) {
        const end = h + 1 < groups ? groupStarts[h + 1]! : digits;
        if (end - first > MAX_DIGITS) break;
        this.work += end - groupStarts[h]!;
        for (let d = groupStarts[h]!; d < end; d += 1) {
          const value = values[d]!;
          if ((d - first) % 2 === 0) {
            evenSum += DOUBLED[value]!;
            oddSum += value;
          } else {
            evenSum += value;
            oddSum += DOUBLED[value]!;
          }
        }
        const length = end - first;
        if (length >= MIN_DIGITS && (length % 2 === 0 ? evenSum : oddSum) % 10 === 0 && found(first, end)) return true;
      }
    }
    return false;
  }
}

/**
 * Reads `text` run by run and hands each complete run to `onRun`; stops when it returns true.
 * Returns whether it was stopped.
 */
function readRuns(text: string, run: Run, onRun: (run: Run) => boolean): boolean {
  const length = text.length;
  let separators = 0;
  let inRun = false;
  for (let i = 0; i < length;) {
    let code = text.charCodeAt(i);
    let width = 1;
    let kind: number;
    if (code < 128) kind = ASCII[code]!;
    else {
      code = text.codePointAt(i)!;
      width = code > 0xffff ? 2 : 1;
      kind = classifyWide(code);
    }
    if (kind >= 0) {
      if (!inRun || separators > 0) run.groupStarts.push(run.values.length);
      run.values.push(kind);
      run.at.push(i);
      run.width.push(width);
      inRun = true;
      separators = 0;
    } else if (kind === SEPARATOR && inRun && separators < MAX_SEPARATORS) {
      separators += 1;
    } else if (inRun) {
      if (onRun(run)) return true;
      run.reset();
      inRun = false;
      separators = 0;
    }
    i += width;
  }
  return inRun && onRun(run);
}

/**
 * What one full pass over `text` costs, as counts (tests assert them; nothing here is timed):
 * the characters read and the digits the candidates' checks visited.
 */
export function cardNumberScanWork(text: string): { read: number; visited: number; found: number } {
  const run = new Run();
  let found = 0;
  readRuns(text, run, (current) => {
    current.cardNumbers(() => {
      found += 1;
      return false;
    });
    return false;
  });
  // readRuns reads each code unit once.
  return { read: text.length, visited: run.work, found };
}

/** True when `text` carries a PAN-shaped value (D58). */
export function containsCardNumber(text: string): boolean {
  if (!mayHoldCardNumber(text)) return false;
  return readRuns(text, new Run(), (run) => run.cardNumbers(() => true));
}

/**
 * `text` with every PAN-shaped value masked as D18 masks a PAN: each of its digits but the last
 * four becomes `*`; separators and everything else stay. Where two card numbers of one run
 * overlap, a digit stays visible only if it is among the last four of each of them. The same
 * string comes back when there is nothing to mask.
 */
export function maskCardNumbers(text: string): string {
  if (!mayHoldCardNumber(text)) return text;
  const masked: number[] = [];
  const run = new Run();
  readRuns(text, run, (current) => {
    // Digits [first, end - 4) of each card number are hidden: a difference array over the run.
    let hidden: Int32Array | undefined;
    current.cardNumbers((first, end) => {
      hidden ??= new Int32Array(current.values.length + 1);
      hidden[first]! += 1;
      hidden[end - 4]! -= 1;
      return false;
    });
    if (hidden) {
      let depth = 0;
      for (let d = 0; d < current.values.length; d += 1) {
        depth += hidden[d]!;
        if (depth > 0) masked.push(current.at[d]!, current.width[d]!);
      }
    }
    return false;
  });
  if (masked.length === 0) return text;
  let out = '';
  let from = 0;
  for (let k = 0; k < masked.length; k += 2) {
    const at = masked[k]!;
    out += `${text.slice(from, at)}*`;
    from = at + masked[k + 1]!;
  }
  return out + text.slice(from);
}
