import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { access, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import selfsigned from 'selfsigned';

/**
 * The embedded local default needs a TLS certificate, a signing key and a card-record key
 * that must never be committed. They are generated once into `.local/` (git-ignored) and
 * reused, so tokens and idempotency records survive a restart of the local gateway.
 */
export async function ensureLocalSecrets(dir: string): Promise<string[]> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const created: string[] = [];
  const missing = async (name: string) => {
    try {
      await access(join(dir, name));
      return false;
    } catch {
      return true;
    }
  };
  // Both are checked (no short-circuit): a lone missing half regenerates the pair, reported as such.
  const [certMissing, keyMissing] = [await missing('tls.crt'), await missing('tls.key')];
  if (certMissing || keyMissing) {
    created.push('tls.crt', 'tls.key');
    const pems = await selfsigned.generate([{ name: 'commonName', value: 'localhost' }], {
      keyType: 'ec',
      curve: 'P-256',
      algorithm: 'sha256',
      notAfterDate: new Date(Date.now() + 365 * 24 * 3600 * 1000),
      extensions: [
        { name: 'basicConstraints', cA: false },
        {
          name: 'subjectAltName',
          altNames: [
            { type: 2, value: 'localhost' },
            { type: 7, ip: '127.0.0.1' },
            { type: 7, ip: '::1' },
          ],
        },
      ],
    });
    await writeFile(join(dir, 'tls.crt'), pems.cert, { mode: 0o600 });
    await writeFile(join(dir, 'tls.key'), pems.private, { mode: 0o600 });
  }
  if (await missing('signing.key')) {
    created.push('signing.key');
    const { privateKey } = generateKeyPairSync('ed25519');
    await writeFile(join(dir, 'signing.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  }
  if (await missing('card-record.key')) {
    created.push('card-record.key');
    await writeFile(join(dir, 'card-record.key'), randomBytes(32).toString('base64'), { mode: 0o600 });
  }
  return created;
}
