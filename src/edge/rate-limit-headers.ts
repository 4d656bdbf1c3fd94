import { tightest, type LimitState } from '../auth/auth-rate-limits.js';

/** An RFC 8941 String: printable ASCII in quotes, `\` and `"` escaped. */
function sfString(text: string): string {
  if (!/^[\x20-\x7e]*$/.test(text)) throw new TypeError(`not an RFC 8941 string: ${JSON.stringify(text)}`);
  return `"${text.replace(/[\\"]/g, '\\$&')}"`;
}

/** An RFC 8941 List of Items: each a policy name with integer parameters. */
const sfList = (items: readonly { name: string; parameters: Record<string, number> }[]): string =>
  items
    .map(
      ({ name, parameters }) =>
        `${sfString(name)}${Object.entries(parameters)
          .map(([key, value]) => `;${key}=${Math.trunc(value)}`)
          .join('')}`,
    )
    .join(', ');

/**
 * The rate-limit headers of an answer, from every limit the request was counted against:
 * `RateLimit-Policy` and `RateLimit` as draft-ietf-httpapi-ratelimit-headers revision 11
 * defines them (D49: `"login";q=5;w=60` and `"login";r=3;t=42`, one item per limit), and the
 * legacy `RateLimit-Limit`/`-Remaining`/`-Reset` of D11 for `speaking`: the limit that refused
 * the request, else the one closest to refusing.
 */
export function rateLimitHeaders(states: readonly LimitState[], speaking = tightest(states)): Record<string, string> {
  if (speaking === undefined) return {};
  return {
    'ratelimit-policy': sfList(states.map((state) => ({ name: state.policy, parameters: { q: state.limit, w: state.window } }))),
    ratelimit: sfList(states.map((state) => ({ name: state.policy, parameters: { r: state.remaining, t: state.reset } }))),
    'ratelimit-limit': String(speaking.limit),
    'ratelimit-remaining': String(speaking.remaining),
    'ratelimit-reset': String(speaking.reset),
  };
}
