import { ALL_ERROR_CODES, ERROR_CATALOGUE } from './error-catalogue.js';

/** Where the client's code table lives, from the repository's root. */
export const CLIENT_ERROR_CODES_PATH = 'client/src/error-codes.ts';

/**
 * The client's code table, as TypeScript source: every code with its status and retry advice,
 * generated from the catalogue (`npm run generate:client`) so that the client, which has no
 * build dependency on the gateway's sources, cannot drift from it. A test regenerates it and
 * compares.
 */
export function renderClientErrorCodes(): string {
  const statuses = ALL_ERROR_CODES.map((code) => `  ${code}: ${ERROR_CATALOGUE[code].status},`);
  const advice = ALL_ERROR_CODES.map((code) => `  ${code}: '${ERROR_CATALOGUE[code].retry}',`);
  return `// Generated from the gateway's error catalogue (src/foundation/error-catalogue.ts) by
// \`npm run generate:client\`. Do not edit: change the catalogue and regenerate (a test fails
// when this file is stale).

/**
 * What a client may do after an error answer (the API guide's "Retrying safely"):
 * - \`no\`: final, repeating the request unchanged cannot help;
 * - \`retry_after\`: repeat after the answer's Retry-After (it always carries one);
 * - \`same_request_id\`: repeat with backoff, a card creation with the same requestId;
 * - \`retry_after_same_request_id\`: both.
 */
export type GatewayRetryAdvice = 'no' | 'retry_after' | 'same_request_id' | 'retry_after_same_request_id';

/** Every \`code\` the gateway's error envelope can carry, with its HTTP status. */
export const GATEWAY_ERROR_CODES = {
${statuses.join('\n')}
} as const;

export type GatewayErrorCode = keyof typeof GATEWAY_ERROR_CODES;

/** Each code's retry advice. */
export const GATEWAY_RETRY_ADVICE: { readonly [C in GatewayErrorCode]: GatewayRetryAdvice } = {
${advice.join('\n')}
};
`;
}
