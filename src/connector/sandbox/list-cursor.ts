import type { BookPosition } from './card-book.js';

/**
 * The sandbox's own list cursor: the position of the last card of a page, base64url-encoded.
 * Opaque to the gateway, which seals it before a client sees it; only its canonical form is
 * accepted, so a cursor the sandbox did not make is a 400, never a guess.
 */

const POSITION = /^(-?(?:0|[1-9]\d{0,15})):([1-9]\d{0,15})$/;

export function encodeCursor(position: BookPosition): string {
  return Buffer.from(`${position.createdMs}:${position.seq}`, 'utf8').toString('base64url');
}

/** The position, or undefined when `cursor` is not one the sandbox made. */
export function decodeCursor(cursor: string): BookPosition | undefined {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(cursor)) return undefined;
  const match = POSITION.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!match) return undefined;
  const position = { createdMs: Number(match[1]), seq: Number(match[2]) };
  if (!Number.isSafeInteger(position.createdMs) || !Number.isSafeInteger(position.seq)) return undefined;
  return encodeCursor(position) === cursor ? position : undefined;
}
