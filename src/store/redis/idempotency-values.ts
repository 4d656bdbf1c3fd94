import type { ClaimAttempt, Reservation, StoredCard } from '../store-types.js';
import { decodeStoredCard, encodeStoredCard } from './card-record-codec.js';

/*
 * An idempotency record is one string key, so that a claim is a single `SET NX` with its expiry
 * and a completion a single `SET ... GET` (a hash needed DEL, HSET and PEXPIRE for each, and a
 * 433-byte field pushed it out of Redis's compact encoding). The first letter says the state:
 *   c|<exp>|<the StoredCard, card-record-codec.ts>   completed; kept as written, never re-encoded
 *   p|{"owner","leaseExp","ofp","oreq","ocred","prev"}   pending (a claim in flight)
 *   r|{"exp","ofp","oreq","ocred"}   released (a failed forward's first attempt, D31)
 * Every value inside the JSON is a string (the scripts' cjson would round large numbers).
 * The scripts (scripts.ts) write and read the same shapes, and still read the hash an earlier
 * version wrote under the same key.
 */

/** A claim's value: `prev` '1' when `first` is a previous attempt carried forward (D31). */
export function pendingValue(owner: string, leaseExpiresAt: number, first: ClaimAttempt): string {
  return `p|${JSON.stringify({ owner, leaseExp: String(leaseExpiresAt), ofp: first.fingerprint, oreq: String(first.requestedCardLimit), ocred: first.credentialId, prev: '0' })}`;
}

export function completedValue(record: StoredCard, expiresAt: number): string {
  return `c|${expiresAt}|${encodeStoredCard(record)}`;
}

interface Fields {
  owner?: string;
  leaseExp?: string;
  exp?: string;
  ofp?: string | false;
  oreq?: string;
  ocred?: string;
}

/** What a stored value says about its key at `now`, for a requester that is not its owner. */
export function reservationOf(value: string | null, now: number): Reservation {
  if (value === null) return { state: 'reserved', previous: undefined };
  if (value.startsWith('c|')) {
    const separator = value.indexOf('|', 2);
    if (Number(value.slice(2, separator)) > now) return { state: 'completed', record: decodeStoredCard(value.slice(separator + 1)) };
    return { state: 'reserved', previous: undefined };
  }
  const fields = JSON.parse(value.slice(2)) as Fields;
  if (value.startsWith('p|') && Number(fields.leaseExp) > now) return { state: 'pending', leaseExpiresAt: Number(fields.leaseExp) };
  const previous = value.startsWith('r|') && Number(fields.exp) > now ? attemptOf(fields) : undefined;
  return { state: 'reserved', previous };
}

/** A pending value's owner, or undefined for any other value. */
export function ownerOf(value: string): string | undefined {
  return value.startsWith('p|') ? (JSON.parse(value.slice(2)) as Fields).owner : undefined;
}

const attemptOf = (fields: Fields): ClaimAttempt | undefined =>
  fields.ofp ? { fingerprint: fields.ofp, requestedCardLimit: Number(fields.oreq), credentialId: fields.ocred ?? '' } : undefined;

/** The fields of a record an earlier version kept as a hash (read by peek during an upgrade). */
export function legacyReservation(fields: (string | null)[], now: number): Reservation {
  const [state, leaseExp, exp, record, ofp, oreq, ocred] = fields;
  if (state === 'completed' && Number(exp) > now && record) return { state: 'completed', record: decodeStoredCard(record) };
  if (state === 'pending' && Number(leaseExp) > now) return { state: 'pending', leaseExpiresAt: Number(leaseExp) };
  const previous =
    state === 'released' && Number(exp) > now && ofp ? { fingerprint: ofp, requestedCardLimit: Number(oreq), credentialId: ocred ?? '' } : undefined;
  return { state: 'reserved', previous };
}

/** The reserve script's answer: `{'completed', record}`, `{'pending', leaseExp}` or `{'reserved', prev, ofp, oreq, ocred}`. */
export function parseReservation(answer: (string | null)[]): Reservation {
  const [state, value, ofp, oreq, ocred] = answer;
  if (state === 'completed' && value) return { state: 'completed', record: decodeStoredCard(value) };
  if (state === 'pending') return { state: 'pending', leaseExpiresAt: Number(value) };
  const previous = value === '1' && ofp ? { fingerprint: ofp, requestedCardLimit: Number(oreq), credentialId: ocred ?? '' } : undefined;
  return { state: 'reserved', previous };
}

export const isWrongType = (error: unknown): boolean => error instanceof Error && error.message.startsWith('WRONGTYPE');
