/*
 * An event's JSON as Redis keeps it: the same text with each member name of the events' shapes
 * (`"createdAt":`) written as one control character. Member names are a third of a typical
 * event (D63), and the events are the store's largest records: a week of them must fit
 * (issue 35: at most 1 KiB of MEMORY USAGE per event). JSON text holds no raw control
 * character (a string escapes them, JSON.stringify never writes one), so the substitution
 * gives back the very same bytes; the three that may stand between tokens (tab, line feed,
 * carriage return) are never used.
 *
 * The table is part of the stored format: an event lives up to 30 days, across upgrades. A
 * member may be appended while a character is free, never moved or removed.
 */
const MEMBERS = [
  'issuingAccount',
  'createdAt',
  'requestedCardLimit',
  'previousStatus',
  'status',
  'credentialId',
  'maskedPan',
  'cardLimit',
  'sequence',
  'expMonth',
  'currency',
  'metadata',
  'expYear',
  'cardId',
  'reason',
  'source',
  'type',
  'data',
  'card',
  'id',
  'transactionId',
  'declineReason',
  'categoryCode',
  'occurredAt',
  'merchant',
  'country',
  'amount',
  'name',
] as const;

/** 0x01-0x1f without tab, line feed and carriage return: 28 characters. */
const CODES = [...Array(31).keys()].map((index) => index + 1).filter((code) => code !== 0x09 && code !== 0x0a && code !== 0x0d);

const BY_MEMBER = new Map<string, string>(MEMBERS.map((member, index) => [`"${member}":`, String.fromCharCode(CODES[index] as number)]));
const BY_CODE = new Map<string, string>([...BY_MEMBER].map(([fragment, code]) => [code, fragment]));
const FRAGMENTS = new RegExp(`"(?:${MEMBERS.join('|')})":`, 'g');
/** Any of CODES (built from them: the table is the one place that names them). */
const CODED = new RegExp(`[${CODES.map((code) => `\\x${code.toString(16).padStart(2, '0')}`).join('')}]`, 'g');

/**
 * A piece of an event's JSON (the part before its sequence, or after) in the stored form.
 * Throws a TypeError on text holding a control character: not JSON text, and not reversible.
 */
export function encodeEventText(text: string): string {
  CODED.lastIndex = 0;
  if (CODED.test(text)) throw new TypeError('an event holds a raw control character: not JSON text');
  return text.replace(FRAGMENTS, (fragment) => BY_MEMBER.get(fragment) ?? fragment);
}

/** The stored form back into the JSON recorded. */
export function decodeEventText(stored: string): string {
  return stored.replace(CODED, (code) => BY_CODE.get(code) ?? code);
}
