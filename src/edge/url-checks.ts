/**
 * Checks every request URL goes through before routing (D12, D25, D30). Each is one linear pass
 * over the URL: a check that runs on every request must cost the same for a hostile 8 KiB URL
 * as for any other 8 KiB URL (a backtracking regex here once cost ~100 ms per request).
 */

/** Longest request target accepted (D25); longer ones get 414. */
export const MAX_URL_BYTES = 8192;

/** Query parameter names that carry tokens, compared after percent-decoding and lower-casing (D30). */
const TOKEN_PARAMETERS: ReadonlySet<string> = new Set(['access_token', 'accesstoken', 'token', 'id_token', 'idtoken', 'refresh_token', 'refreshtoken']);

const hexValue = (code: number): number => {
  if (code >= 48 && code <= 57) return code - 48;
  if (code >= 65 && code <= 70) return code - 55;
  if (code >= 97 && code <= 102) return code - 87;
  return -1;
};

/** Percent-decodes as bytes then UTF-8, never throwing: a malformed escape stays as written. */
function percentDecode(text: string, work: ScanWork): string {
  if (!text.includes('%')) return text;
  work.chars += text.length;
  const bytes: number[] = [];
  for (let i = 0; i < text.length; i += 1) {
    const code = text.charCodeAt(i);
    if (code === 37 && i + 2 < text.length) {
      const high = hexValue(text.charCodeAt(i + 1));
      const low = hexValue(text.charCodeAt(i + 2));
      if (high >= 0 && low >= 0) {
        bytes.push(high * 16 + low);
        i += 2;
        continue;
      }
    }
    // Nothing outside ASCII can be part of a parameter name or a token: a space keeps it apart.
    bytes.push(code < 128 ? code : 32);
  }
  return Buffer.from(bytes).toString('utf8');
}

const isTokenChar = (code: number): boolean =>
  (code >= 48 && code <= 57) || (code >= 65 && code <= 90) || (code >= 97 && code <= 122) || code === 45 || code === 95;

/**
 * True when the text holds something shaped like a JWS compact token: a base64url part holding
 * `eyJ` (the encoding of `{"`), a dot, a non-empty part, and another dot. One pass: the text is
 * cut into runs of base64url characters and dots, and each run into its dot-separated parts.
 */
function containsJwt(text: string, work: ScanWork): boolean {
  // Counted before the fast path: its native searches read up to the whole text too.
  work.chars += text.length + 1;
  // Without two dots and an `eyJ` there is no such token: two native searches answer for most
  // URLs (every route's own path, and a flood of 8 KiB `eyJ` repeats) without the pass below.
  const firstDot = text.indexOf('.');
  if (firstDot === -1 || text.indexOf('.', firstDot + 1) === -1 || !text.includes('eyJ')) return false;
  let partStart = 0;
  // The part before the current one, in the same run, holds `eyJ`.
  let previousHasMarker = false;
  for (let i = 0; i <= text.length; i += 1) {
    const code = i < text.length ? text.charCodeAt(i) : -1;
    if (code !== -1 && isTokenChar(code)) continue;
    if (code === 46 /* . */) {
      if (previousHasMarker && i > partStart) return true;
      previousHasMarker = text.slice(partStart, i).includes('eyJ');
      work.chars += i - partStart;
    } else {
      previousHasMarker = false;
    }
    partStart = i + 1;
  }
  return false;
}

/**
 * Characters the checks looked at: what a test counts to show the work is linear in the URL
 * (a count, where timing would depend on how busy the machine is).
 */
export interface ScanWork {
  chars: number;
}

/** D12, D30: a token-bearing query parameter, or a JWT anywhere in the decoded URL. */
export function urlCarriesToken(url: string, work: ScanWork = { chars: 0 }): boolean {
  const query = url.indexOf('?');
  if (query !== -1) {
    let start = query + 1;
    while (start <= url.length) {
      let end = url.indexOf('&', start);
      if (end === -1) end = url.length;
      const equals = url.indexOf('=', start);
      const nameEnd = equals === -1 || equals > end ? end : equals;
      work.chars += end - start + 1;
      const name = percentDecode(url.slice(start, nameEnd).replaceAll('+', ' '), work).trim().toLowerCase();
      if (TOKEN_PARAMETERS.has(name)) return true;
      start = end + 1;
    }
  }
  return containsJwt(percentDecode(url, work), work);
}
