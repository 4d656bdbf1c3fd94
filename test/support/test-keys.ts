import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { localhostCertificate } from '../../tools/launch/certificate.js';

export interface TestKeys {
  dir: string;
  tlsCert: string;
  tlsKey: string;
  signingKey: string;
  otherSigningKey: string;
  /** Public half of otherSigningKey, for rotation tests. */
  otherPublicKey: string;
  cardKey: string;
  /** A connector shared secret (mode 0600), for production-shaped configs. */
  connectorSecret: string;
  /** A Redis password (mode 0600), for production-shaped configs (D50). */
  redisPassword: string;
}

/** Makes the run's keys and certificate into a new temp folder (global setup, once per run). */
export async function makeTestKeys(): Promise<TestKeys> {
  const dir = mkdtempSync(join(tmpdir(), 'gw-keys-'));
  const pems = await localhostCertificate();
  const write = (name: string, content: string) => {
    const path = join(dir, name);
    writeFileSync(path, content, { mode: 0o600 });
    return path;
  };
  const signing = generateKeyPairSync('ed25519');
  const other = generateKeyPairSync('ed25519');
  return {
    dir,
    tlsCert: write('tls.crt', pems.cert),
    tlsKey: write('tls.key', pems.key),
    signingKey: write('signing.key', signing.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()),
    otherSigningKey: write('other-signing.key', other.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()),
    otherPublicKey: write('other-signing.pub', other.publicKey.export({ type: 'spki', format: 'pem' }).toString()),
    cardKey: write('card.key', randomBytes(32).toString('base64')),
    connectorSecret: write('connector.secret', randomBytes(24).toString('base64url')),
    redisPassword: write('redis.password', randomBytes(24).toString('base64url')),
  };
}
