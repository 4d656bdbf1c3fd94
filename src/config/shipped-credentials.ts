import { parsePasswordHash, type ParsedHash } from '../foundation/password-hash.js';

/**
 * The password hashes the repository ships in `config/` (the local demo credential, whose
 * password the README prints). Anyone can log in with them, so production refuses a credential
 * that uses one and sandbox warns (D62). A test keeps this list equal to the hashes in the
 * repository's config files.
 */
export const SHIPPED_PASSWORD_HASHES: readonly string[] = [
  // config/credentials.local.yaml: `demo` / `local-demo-password`
  'scrypt$16384$8$1$DN/LqaDpI5YTrFfrwkyM2w==$066xue94g6MTCXFQS8I5n7a5oAa2xSYKM11z2YigTHI=',
];

const SHIPPED: readonly ParsedHash[] = SHIPPED_PASSWORD_HASHES.map(parsePasswordHash);

/** Whether `hash` is one the repository ships: the same parameters, salt and hash, however the line was written. */
export function isShippedHash(hash: ParsedHash): boolean {
  return SHIPPED.some(
    (shipped) => shipped.N === hash.N && shipped.r === hash.r && shipped.p === hash.p && shipped.salt.equals(hash.salt) && shipped.hash.equals(hash.hash),
  );
}
