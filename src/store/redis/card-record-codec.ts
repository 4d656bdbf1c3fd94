import { CARD_STATUSES, type CardStatus } from '../../foundation/card-status.js';
import type { StoredCard } from '../store-types.js';

/*
 * What a replay must answer of a card (StoredCard), in as few bytes as Redis will keep: a
 * card's record is the one record kind that grows with the business (a million cards a day are
 * a million records alive), and a string key's memory steps in 64-byte classes (issue 35: at
 * most 500 B of `MEMORY USAGE` per record). A JSON array, positional, instead of the object
 * this version's predecessor wrote (its member names were a third of the value):
 *
 *   [2, fingerprint, creator, cardId, maskedPan, maskedCvc, expMonth, expYear, status,
 *    requestedCardLimit, cardLimit, currency, createdAt, sealedSecrets]
 *
 * - 2 is the format (the earlier object form, which starts with `{`, is format 1: still read);
 * - maskedPan is `[stars, rest]` when it starts with `*` (D18 masks every digit but the last
 *   four: `[12, "4242"]` for `************4242`), else the string itself;
 * - maskedCvc is its length when it is all `*`, the string otherwise, null when absent;
 * - status is its index in CARD_STATUSES;
 * - createdAt is epoch ms when that gives back the very same text (`toISOString()`), else the
 *   string the connector sent, so a replay answers exactly what the first answer said.
 * JSON keeps any character the connector or the config may put in an id.
 */
const FORMAT = 2;

type Encoded = [
  format: number,
  fingerprint: string,
  creator: string,
  cardId: string,
  maskedPan: string | [number, string],
  maskedCvc: string | number | null,
  expMonth: number,
  expYear: number,
  status: number,
  requestedCardLimit: number,
  cardLimit: number,
  currency: string,
  createdAt: string | number,
  sealedSecrets: string,
];

const leadingStars = (text: string): number => {
  let count = 0;
  while (text.charCodeAt(count) === 42 /* '*' */) count += 1;
  return count;
};

function encodeCreatedAt(createdAt: string): string | number {
  const ms = Date.parse(createdAt);
  return Number.isFinite(ms) && new Date(ms).toISOString() === createdAt ? ms : createdAt;
}

/** The record's text as Redis keeps it after `c|<exp>|`. */
export function encodeStoredCard(record: StoredCard): string {
  const { card } = record;
  const stars = leadingStars(card.maskedPan);
  const cvc = card.maskedCvc;
  const status = CARD_STATUSES.indexOf(card.status);
  if (status < 0) throw new TypeError(`card status ${card.status} cannot be stored`);
  const encoded: Encoded = [
    FORMAT,
    record.fingerprint,
    record.creator,
    card.cardId,
    stars > 0 ? [stars, card.maskedPan.slice(stars)] : card.maskedPan,
    cvc === undefined ? null : cvc.length > 0 && leadingStars(cvc) === cvc.length ? cvc.length : cvc,
    card.expMonth,
    card.expYear,
    status,
    card.requestedCardLimit,
    card.cardLimit,
    card.currency,
    encodeCreatedAt(card.createdAt),
    record.sealedSecrets,
  ];
  return JSON.stringify(encoded);
}

/** A record's text in this format or the earlier JSON object (written before the upgrade). */
export function decodeStoredCard(text: string): StoredCard {
  if (text.startsWith('{')) return JSON.parse(text) as StoredCard;
  const [format, fingerprint, creator, cardId, pan, cvc, expMonth, expYear, status, requestedCardLimit, cardLimit, currency, createdAt, sealedSecrets] =
    JSON.parse(text) as Encoded;
  if (format !== FORMAT) throw new Error(`card record of unknown format ${String(format)}`);
  return {
    fingerprint,
    creator,
    card: {
      cardId,
      maskedPan: typeof pan === 'string' ? pan : '*'.repeat(pan[0]) + pan[1],
      ...(cvc !== null && { maskedCvc: typeof cvc === 'number' ? '*'.repeat(cvc) : cvc }),
      expMonth,
      expYear,
      status: CARD_STATUSES[status] as CardStatus,
      requestedCardLimit,
      cardLimit,
      currency,
      createdAt: typeof createdAt === 'number' ? new Date(createdAt).toISOString() : createdAt,
    },
    sealedSecrets,
  };
}
