import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

export interface CardSecrets {
  pan: string;
  cvc: string;
}

/**
 * The PAN and CVC an idempotency record keeps for a later reveal, sealed with AES-256-GCM
 * (D18). The record's key is the additional authenticated data: a sealed value copied onto
 * another record does not open. Format: `v1.<iv>.<tag>.<ciphertext>`, base64url.
 */
export function sealCardSecrets(secrets: CardSecrets, key: Buffer, recordKey: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(recordKey, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(JSON.stringify(secrets), 'utf8'), cipher.final()]);
  return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ciphertext.toString('base64url')].join('.');
}

export function openCardSecrets(sealed: string, key: Buffer, recordKey: string): CardSecrets {
  const [version, iv, tag, ciphertext] = sealed.split('.');
  if (version !== 'v1' || !iv || !tag || !ciphertext) throw new TypeError('unknown sealed card format');
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
  decipher.setAAD(Buffer.from(recordKey, 'utf8'));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  const plain = Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]).toString('utf8');
  return JSON.parse(plain) as CardSecrets;
}
