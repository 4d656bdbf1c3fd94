import { ConfigFileSchema } from '../config-schema.js';
import type { CardRecordKey, CardSettings } from '../config-types.js';
import { decodeEncryptionKey } from '../keys.js';
import type { SectionContext } from '../load-context.js';
import { accept, child, entries, members } from '../schema-parts.js';

const CARDS = ConfigFileSchema.properties.cards;
const CARD_RECORD_KEY = CARDS.properties.encryptionKey;

/**
 * `cards`: the card-record key and the retired keys that still open older records (D18, D37),
 * each 32 bytes, kids unique. A mistyped kid does not stop its key being checked (D52).
 */
export async function loadCards(raw: unknown, context: SectionContext): Promise<CardSettings | undefined> {
  const { problems } = context;
  const cardKey = async (field: string, entry: unknown): Promise<CardRecordKey | undefined> => {
    const { kid, key: ref } = members(CARD_RECORD_KEY, entry);
    const bytes = await context.secret(`${field}.key`, ref, 'private');
    const key = bytes ? await problems.capture(`${field}.key`, () => decodeEncryptionKey(bytes)) : undefined;
    return key && kid !== undefined ? { kid, key } : undefined;
  };
  const encryptionKey = await cardKey('cards.encryptionKey', child(raw, 'encryptionKey'));
  const previousEncryptionKeys: CardRecordKey[] = [];
  const kids = new Set([members(CARD_RECORD_KEY, child(raw, 'encryptionKey')).kid]);
  for (const [index, entry] of entries(child(raw, 'previousEncryptionKeys')).entries()) {
    const field = `cards.previousEncryptionKeys[${index}]`;
    const { kid } = members(CARD_RECORD_KEY, entry);
    if (kid !== undefined && kids.has(kid)) {
      problems.add(`${field}.kid`, `duplicate kid "${kid}"`);
      continue;
    }
    kids.add(kid);
    const previous = await cardKey(field, entry);
    if (previous) previousEncryptionKeys.push(previous);
  }

  const whole = accept(CARDS, raw);
  if (!whole || !encryptionKey) return undefined;
  return { ...whole, encryptionKey, previousEncryptionKeys };
}
