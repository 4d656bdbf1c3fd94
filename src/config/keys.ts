import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';

/** A PEM private key, unencrypted (the gateway has nobody to ask for a passphrase). */
export function parsePrivateKey(pem: Buffer): KeyObject {
  try {
    return createPrivateKey(pem);
  } catch {
    if (/-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type: 4,ENCRYPTED/.test(pem.toString('utf8')))
      throw new Error('is an encrypted private key; the gateway needs it unencrypted');
    throw new Error('is not a PEM private key');
  }
}

export function parsePublicKey(pem: Buffer): KeyObject {
  try {
    return createPublicKey(pem);
  } catch {
    throw new Error('is not a PEM public key');
  }
}

/** A token key must be of the kind `tokens.algorithm` signs with. */
export function checkKeyType(key: KeyObject, algorithm: 'EdDSA' | 'ES256'): KeyObject {
  const ok =
    algorithm === 'EdDSA' ? key.asymmetricKeyType === 'ed25519' : key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1';
  if (!ok)
    throw new Error(
      `is a ${key.asymmetricKeyType ?? 'unknown'} key, but tokens.algorithm ${algorithm} needs ${algorithm === 'EdDSA' ? 'an Ed25519' : 'a P-256'} key`,
    );
  return key;
}

/** A card-record key (D18, D37): 32 bytes, as 64 hex digits or base64. */
export function decodeEncryptionKey(raw: Buffer): Buffer {
  const text = raw.toString('utf8').trim();
  const key = /^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64');
  if (key.length !== 32) throw new Error('must be 32 bytes, written as 64 hex digits or base64 (AES-256-GCM, D18)');
  return key;
}
