import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { errors } from '../foundation/errors.js';

export interface CardSecrets {
  pan: string;
  cvc: string;
}

/** A card-record key and its id (D37). */
export interface CardRecordKey {
  readonly kid: string;
  readonly key: Buffer;
}

/** IVs come from a pool refilled 256 at a time: one random read per 256 seals instead of one each. */
const IV_LENGTH = 12;
let ivPool = Buffer.alloc(0);
let ivOffset = 0;
function nextIv(): Buffer {
  if (ivOffset + IV_LENGTH > ivPool.length) {
    ivPool = randomBytes(IV_LENGTH * 256);
    ivOffset = 0;
  }
  const iv = ivPool.subarray(ivOffset, ivOffset + IV_LENGTH);
  ivOffset += IV_LENGTH;
  return iv;
}

function open(parts: { iv: string; tag: string; ciphertext: string }, key: Buffer, recordKey: string): CardSecrets {
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(parts.iv, 'base64url'));
  decipher.setAAD(Buffer.from(recordKey, 'utf8'));
  decipher.setAuthTag(Buffer.from(parts.tag, 'base64url'));
  const plain = Buffer.concat([decipher.update(Buffer.from(parts.ciphertext, 'base64url')), decipher.final()]).toString('utf8');
  // `pan:cvc` (v2) or the JSON object of the first format.
  if (plain.startsWith('{')) return JSON.parse(plain) as CardSecrets;
  const colon = plain.indexOf(':');
  return { pan: plain.slice(0, colon), cvc: plain.slice(colon + 1) };
}

/**
 * Seals the PAN and CVC an idempotency record keeps for a later reveal (D18), with AES-256-GCM
 * and the record's key as additional authenticated data: a sealed value copied onto another
 * record does not open. Format `v2.<kid>.<iv>.<tag>.<ciphertext>` (base64url): the key id says
 * which key opens it, so the card-record key can be rotated while records sealed under the
 * previous keys (`cards.previousEncryptionKeys`) still open (D37). Records of the first format
 * (`v1.`, no key id) are tried with every configured key.
 */
export class CardSealer {
  readonly #current: CardRecordKey;
  readonly #byKid: ReadonlyMap<string, Buffer>;

  constructor(current: CardRecordKey, previous: readonly CardRecordKey[] = []) {
    this.#current = current;
    this.#byKid = new Map([current, ...previous].map((entry) => [entry.kid, entry.key]));
  }

  seal(secrets: CardSecrets, recordKey: string): string {
    const iv = nextIv();
    const cipher = createCipheriv('aes-256-gcm', this.#current.key, iv);
    cipher.setAAD(Buffer.from(recordKey, 'utf8'));
    // PAN and CVC are digits only (the connector contract checks it): `pan:cvc` needs no JSON.
    const ciphertext = Buffer.concat([cipher.update(`${secrets.pan}:${secrets.cvc}`, 'latin1'), cipher.final()]);
    return ['v2', this.#current.kid, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ciphertext.toString('base64url')].join('.');
  }

  /** The secrets of a sealed record; a record no configured key opens is `record_unreadable` (500). */
  open(sealed: string, recordKey: string): CardSecrets {
    const parts = sealed.split('.');
    try {
      if (parts[0] === 'v2' && parts.length === 5) {
        const [, kid, iv, tag, ciphertext] = parts as [string, string, string, string, string];
        const key = this.#byKid.get(kid);
        if (!key) throw new Error(`no configured card-record key has id ${kid}`);
        return open({ iv, tag, ciphertext }, key, recordKey);
      }
      if (parts[0] === 'v1' && parts.length === 4) {
        const [, iv, tag, ciphertext] = parts as [string, string, string, string];
        for (const key of this.#byKid.values()) {
          try {
            return open({ iv, tag, ciphertext }, key, recordKey);
          } catch {
            // the next key, maybe
          }
        }
        throw new Error('no configured card-record key opens this record');
      }
      throw new Error('unknown sealed card format');
    } catch (error) {
      throw errors.recordUnreadable(error);
    }
  }
}
