import { randomBytes, randomInt } from 'node:crypto';
import type { ConnectorCard, ConnectorCardRecord } from '../connector-contract.js';
import { luhnCheckDigit } from './luhn.js';

const PAN_LENGTH = 16;

/** What the sandbox keeps of a creation request. */
export interface NewCard {
  requestId: string;
  issuingAccount: string;
  requestedCardLimit: number;
  cardLimit: number;
  currency: string;
  expiryMonths: number;
  metadata: Record<string, string>;
}

/** A made card: its record and the instant it was made, in epoch milliseconds. */
export interface MadeCard {
  record: ConnectorCardRecord;
  createdMs: number;
}

/**
 * Makes cards: Luhn-valid PANs on the BIN, unique within the process until `forget()`.
 * @throws TypeError when `binPrefix` is not 1..15 digits.
 */
export function createCardMaker(binPrefix: string, now: () => number): { make(input: NewCard): MadeCard; forget(): void } {
  if (!/^\d{1,15}$/.test(binPrefix)) throw new TypeError('binPrefix must be 1..15 digits');
  const issuedPans = new Set<string>();

  const newPan = (): string => {
    for (;;) {
      let payload = binPrefix;
      while (payload.length < PAN_LENGTH - 1) payload += String(randomInt(10));
      const pan = payload + luhnCheckDigit(payload);
      if (!issuedPans.has(pan)) {
        issuedPans.add(pan);
        return pan;
      }
    }
  };

  return {
    make(input) {
      const createdMs = now();
      const created = new Date(createdMs);
      const expiryIndex = created.getUTCFullYear() * 12 + created.getUTCMonth() + input.expiryMonths;
      const record: ConnectorCardRecord = {
        cardId: `card_${randomBytes(12).toString('hex')}`,
        pan: newPan(),
        cvc: String(randomInt(1000)).padStart(3, '0'),
        expMonth: (expiryIndex % 12) + 1,
        expYear: Math.floor(expiryIndex / 12),
        status: 'active',
        cardLimit: input.cardLimit,
        currency: input.currency,
        createdAt: created.toISOString(),
        issuingAccount: input.issuingAccount,
        requestId: input.requestId,
        requestedCardLimit: input.requestedCardLimit,
        metadata: { ...input.metadata },
      };
      return { record, createdMs };
    },
    forget: () => issuedPans.clear(),
  };
}

/** The creation answer: the record's first nine members, nothing of the account or metadata. */
export function creationAnswer(record: ConnectorCardRecord): ConnectorCard {
  const { cardId, pan, cvc, expMonth, expYear, status, cardLimit, currency, createdAt } = record;
  return { cardId, pan, cvc, expMonth, expYear, status, cardLimit, currency, createdAt };
}
