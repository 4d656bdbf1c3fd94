import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import type { CardStatus } from '../foundation/card-status.js';
import type { CardRecordKey } from './card-sealing.js';

/** What a cursor is bound to: the listing it continues (D44). The page size is not: it may change between pages. */
export interface CursorBinding {
  readonly issuingAccount: string;
  readonly status: CardStatus | undefined;
  readonly createdAfter: string | undefined;
  readonly createdBefore: string | undefined;
}

const VERSION = 'c1';
const IV_LENGTH = 12;
const TAG_LENGTH = 16;
/** Domain separation: the cursor key is derived from the card-record key, never the same bytes. */
const HKDF_INFO = Buffer.from('card-gateway list cursor v1', 'utf8');

const deriveKey = (key: Buffer): Buffer => Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), HKDF_INFO, 32));

/** What a sealed cursor is bound to, in one unambiguous spelling (JSON of an array): its associated data. */
export type BindingParts = readonly (string | null)[];

const cardParts = (binding: CursorBinding): BindingParts => [
  binding.issuingAccount,
  binding.status ?? null,
  binding.createdAfter ?? null,
  binding.createdBefore ?? null,
];

/** base64url that decodes to bytes which encode back to the same text: no second spelling of one cursor. */
function canonicalBytes(text: string): Buffer | undefined {
  if (!/^[A-Za-z0-9_-]+$/.test(text)) return undefined;
  const bytes = Buffer.from(text, 'base64url');
  return bytes.toString('base64url') === text ? bytes : undefined;
}

/**
 * Seals the connector's page cursors before a client sees them (D44): AES-256-GCM under a key
 * derived (HKDF-SHA256) from each card-record key, so cursors rotate with those keys (D37): a
 * cursor names the kid it was sealed under, and opens while that key is configured, current or
 * previous. The issuing account and the filters are the associated data: a cursor altered,
 * forged, or replayed by another account or with other filters does not open. The connector's
 * cursor is never shown to the client and the client's text never reaches the connector.
 *
 * Format: `c1.<kid>.<iv>.<ciphertext+tag>` (base64url).
 */
export class CardCursorSealer {
  readonly #current: { kid: string; key: Buffer };
  readonly #byKid: ReadonlyMap<string, Buffer>;

  constructor(current: CardRecordKey, previous: readonly CardRecordKey[] = []) {
    this.#current = { kid: current.kid, key: deriveKey(current.key) };
    this.#byKid = new Map([current, ...previous].map((entry) => [entry.kid, deriveKey(entry.key)]));
  }

  seal(connectorCursor: string, binding: CursorBinding): string {
    return this.sealBound(connectorCursor, cardParts(binding));
  }

  /** The connector's cursor, or undefined when this cursor does not open for this binding (400 invalid_cursor). */
  open(sealed: string, binding: CursorBinding): string | undefined {
    return this.openBound(sealed, cardParts(binding));
  }

  /**
   * Seals any position under any binding: the event listing (events/read-events.ts) binds its
   * own filters, with a first part no card listing has, so neither opens the other's cursors.
   */
  sealBound(position: string, parts: BindingParts): string {
    const iv = randomBytes(IV_LENGTH);
    const cipher = createCipheriv('aes-256-gcm', this.#current.key, iv);
    cipher.setAAD(Buffer.from(JSON.stringify(parts), 'utf8'));
    const body = Buffer.concat([cipher.update(position, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return [VERSION, this.#current.kid, iv.toString('base64url'), body.toString('base64url')].join('.');
  }

  openBound(sealed: string, parts: BindingParts): string | undefined {
    const pieces = sealed.split('.');
    if (pieces.length !== 4 || pieces[0] !== VERSION) return undefined;
    const key = this.#byKid.get(pieces[1]!);
    const iv = canonicalBytes(pieces[2]!);
    const body = canonicalBytes(pieces[3]!);
    if (!key || iv?.length !== IV_LENGTH || !body || body.length < TAG_LENGTH) return undefined;
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_LENGTH });
      decipher.setAAD(Buffer.from(JSON.stringify(parts), 'utf8'));
      decipher.setAuthTag(body.subarray(body.length - TAG_LENGTH));
      return Buffer.concat([decipher.update(body.subarray(0, body.length - TAG_LENGTH)), decipher.final()]).toString('utf8');
    } catch {
      return undefined;
    }
  }
}
