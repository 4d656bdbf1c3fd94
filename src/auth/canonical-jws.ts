const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/**
 * True when a base64url segment is the one canonical encoding of its bytes. The last character
 * of a segment whose length is not a multiple of 4 carries bits past the end of the data; a
 * decoder ignores them, so up to 15 other spellings decode to the same bytes. Only the spelling
 * with those bits zero is accepted (D33): a token string then names exactly one token, which
 * the verified-token cache and any deny-list keyed by the string rely on.
 */
export function isCanonicalBase64url(segment: string): boolean {
  const rest = segment.length % 4;
  if (rest === 0) return true;
  if (rest === 1) return false;
  const last = ALPHABET.indexOf(segment[segment.length - 1]!);
  if (last < 0) return false;
  // 2 characters left over encode 1 byte (4 spare bits), 3 encode 2 bytes (2 spare bits).
  return (last & (rest === 2 ? 0b1111 : 0b11)) === 0;
}

/** Every segment of a compact JWS is canonical base64url. */
export function isCanonicalCompactJws(token: string): boolean {
  const first = token.indexOf('.');
  const second = token.indexOf('.', first + 1);
  if (first < 0 || second < 0) return false;
  return isCanonicalBase64url(token.slice(0, first)) && isCanonicalBase64url(token.slice(first + 1, second)) && isCanonicalBase64url(token.slice(second + 1));
}
