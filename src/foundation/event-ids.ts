import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/**
 * Event ids (D63): `evt_` and 26 Crockford base32 characters, 10 of the time in ms and 16 of
 * randomness (ULID's layout). Within a process the randomness of a millisecond counts up, so
 * ids made by one replica sort in the order it made them; across replicas they sort by time.
 * The ids a client sees are opaque: only their uniqueness is promised.
 */
export class EventIds {
  #lastMs = -1;
  readonly #random = new Uint8Array(10);

  constructor(private readonly now: () => number) {}

  next(): string {
    const ms = Math.max(0, Math.floor(this.now()));
    if (ms > this.#lastMs) {
      this.#lastMs = ms;
      this.#random.set(randomBytes(10));
    } else {
      increment(this.#random);
    }
    return `evt_${encodeTime(this.#lastMs)}${encodeRandom(this.#random)}`;
  }
}

/** Adds one to the 80-bit big-endian number; wraps around (2^80 ids within one ms never happen). */
function increment(bytes: Uint8Array): void {
  for (let index = bytes.length - 1; index >= 0; index -= 1) {
    bytes[index] = (bytes[index]! + 1) & 0xff;
    if (bytes[index] !== 0) return;
  }
}

function encodeTime(ms: number): string {
  let out = '';
  let rest = ms;
  for (let index = 0; index < 10; index += 1) {
    out = ALPHABET[rest % 32]! + out;
    rest = Math.floor(rest / 32);
  }
  return out;
}

/** 80 bits, 5 at a time, most significant first. */
function encodeRandom(bytes: Uint8Array): string {
  let out = '';
  let buffer = 0;
  let bits = 0;
  for (const byte of bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += ALPHABET[(buffer >> bits) & 31]!;
    }
    buffer &= (1 << bits) - 1;
  }
  return out;
}

/** The shape an event id has; anything else is refused before reaching the store. */
export const EVENT_ID_PATTERN = '^evt_[0-9A-HJKMNP-TV-Z]{26}$';
