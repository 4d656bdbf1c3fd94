import { createPublicKey, type KeyObject } from 'node:crypto';
import { ConfigFileSchema } from '../config-schema.js';
import type { TokenSettings, VerificationKey } from '../config-types.js';
import { checkKeyType, parsePrivateKey, parsePublicKey } from '../keys.js';
import type { SectionContext } from '../load-context.js';
import { accept, child, entries, members } from '../schema-parts.js';

const TOKENS = ConfigFileSchema.properties.tokens;
const VERIFICATION_KEY = TOKENS.properties.verificationKeys.items;

/**
 * `tokens`: the signing key and the verification keys, read, parsed and checked against
 * `tokens.algorithm`; kids unique. A mistyped kid does not stop its key file being checked (D52).
 */
export async function loadTokens(raw: unknown, context: SectionContext): Promise<TokenSettings | undefined> {
  const { problems } = context;
  const { algorithm } = members(TOKENS, raw);
  const signing = members(TOKENS.properties.signingKey, child(raw, 'signingKey'));
  // The key's kind is checked only against a well-formed algorithm (a wrong one is the schema's problem).
  const ofAlgorithm = (key: KeyObject) => (algorithm ? checkKeyType(key, algorithm) : key);

  const signingPem = await context.secret('tokens.signingKey.privateKey', signing.privateKey, 'private');
  const signingKey = signingPem ? await problems.capture('tokens.signingKey.privateKey', () => ofAlgorithm(parsePrivateKey(signingPem))) : undefined;
  const verificationKeys: VerificationKey[] = signingKey && signing.kid !== undefined ? [{ kid: signing.kid, key: createPublicKey(signingKey) }] : [];
  const kids = new Set(signing.kid === undefined ? [] : [signing.kid]);
  for (const [index, entry] of entries(child(raw, 'verificationKeys')).entries()) {
    const field = `tokens.verificationKeys[${index}]`;
    const { kid, publicKey } = members(VERIFICATION_KEY, entry);
    if (kid !== undefined && kids.has(kid)) {
      problems.add(`${field}.kid`, `duplicate kid "${kid}"`);
      continue;
    }
    if (kid !== undefined) kids.add(kid);
    const pem = await context.secret(`${field}.publicKey`, publicKey, 'public');
    const key = pem ? await problems.capture(`${field}.publicKey`, () => ofAlgorithm(parsePublicKey(pem))) : undefined;
    if (key && kid !== undefined) verificationKeys.push({ kid, key });
  }

  const whole = accept(TOKENS, raw);
  if (!whole || !signingKey) return undefined;
  return { ...whole, signingKey: { kid: whole.signingKey.kid, key: signingKey }, verificationKeys };
}
