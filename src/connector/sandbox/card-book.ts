import type { CardStatus } from '../../foundation/card-status.js';
import type { ConnectorCardRecord } from '../connector-contract.js';
import type { MadeCard } from './card-maker.js';

/** Where a card sits in its account's order: creation instant, then a sequence that breaks ties. */
export interface BookPosition {
  createdMs: number;
  seq: number;
}

export interface BookEntry extends BookPosition {
  key: string;
  record: ConnectorCardRecord;
}

/** One page's selection; `before` is the cursor's position (exclusive); the instants are inclusive (D61), in whole milliseconds. */
export interface PageFilter {
  limit: number;
  before?: BookPosition;
  status?: CardStatus;
  createdAfterMs?: number;
  createdBeforeMs?: number;
}

/** What a status change did (D57): the status before it, and whether it changed; or the refusal of a canceled card. */
export type StatusChangeOutcome = { outcome: 'changed' | 'unchanged'; previousStatus: CardStatus } | { outcome: 'refused_canceled' };

const compare = (a: BookPosition, b: BookPosition): number => a.createdMs - b.createdMs || a.seq - b.seq;

/** First index whose position is at least `at` (arrays are ascending). */
function lowerBound(entries: readonly BookEntry[], at: BookPosition): number {
  let low = 0;
  let high = entries.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (compare(entries[middle]!, at) < 0) low = middle + 1;
    else high = middle;
  }
  return low;
}

/**
 * The sandbox's cards in memory, by idempotency key, by id and per account in creation order.
 * Every method is synchronous: no await separates a lookup from its insert or change, so
 * concurrent requests can never both create a card for one key.
 *
 * Pages are keyset pages: a cursor is the position of the last card shown, and the next page
 * starts strictly below it. A card created meanwhile sorts above every cursor already handed out
 * (its instant is no earlier, its sequence higher), so paging never shows a card twice and never
 * skips one that existed when it started, however many are created in between.
 */
export class CardBook {
  private readonly byKey = new Map<string, BookEntry>();
  private readonly byId = new Map<string, BookEntry>();
  private readonly byAccount = new Map<string, BookEntry[]>();
  private sequence = 0;

  get size(): number {
    return this.byKey.size;
  }

  keys(): string[] {
    return [...this.byKey.keys()];
  }

  withKey(key: string): BookEntry | undefined {
    return this.byKey.get(key);
  }

  add(key: string, made: MadeCard): BookEntry {
    this.sequence += 1;
    const entry: BookEntry = { key, record: made.record, createdMs: made.createdMs, seq: this.sequence };
    this.byKey.set(key, entry);
    this.byId.set(made.record.cardId, entry);
    let account = this.byAccount.get(made.record.issuingAccount);
    if (!account) {
      account = [];
      this.byAccount.set(made.record.issuingAccount, account);
    }
    const last = account[account.length - 1];
    // A clock that went back (an injected one) still files the card in order.
    if (last === undefined || compare(last, entry) < 0) account.push(entry);
    else account.splice(lowerBound(account, entry), 0, entry);
    return entry;
  }

  /** The card with this id, whatever its account (the caller decides about ownership). */
  withId(cardId: string): BookEntry | undefined {
    return this.byId.get(cardId);
  }

  /** The card, only when it belongs to `issuingAccount`. */
  owned(issuingAccount: string, cardId: string): BookEntry | undefined {
    const entry = this.byId.get(cardId);
    return entry?.record.issuingAccount === issuingAccount ? entry : undefined;
  }

  /** Newest first; `next` is the position to continue below, absent on the last page. */
  page(issuingAccount: string, filter: PageFilter): { entries: BookEntry[]; next: BookPosition | undefined } {
    const account = this.byAccount.get(issuingAccount) ?? [];
    let start = account.length - 1;
    if (filter.before) start = Math.min(start, lowerBound(account, filter.before) - 1);
    if (filter.createdBeforeMs !== undefined) start = Math.min(start, lowerBound(account, { createdMs: filter.createdBeforeMs + 1, seq: -1 }) - 1);
    const entries: BookEntry[] = [];
    for (let i = start; i >= 0 && entries.length <= filter.limit; i -= 1) {
      const entry = account[i]!;
      if (filter.createdAfterMs !== undefined && entry.createdMs < filter.createdAfterMs) break;
      if (filter.status === undefined || entry.record.status === filter.status) entries.push(entry);
    }
    if (entries.length <= filter.limit) return { entries, next: undefined };
    entries.pop();
    const last = entries[entries.length - 1]!;
    return { entries, next: { createdMs: last.createdMs, seq: last.seq } };
  }

  /**
   * Active and inactive go both ways and to canceled; canceled is final; the same status changes
   * nothing. Synchronous, so the status it reports as before is the one it changed from: of two
   * concurrent changes to one status, exactly one is `changed` (D57).
   */
  changeStatus(entry: BookEntry, status: CardStatus): StatusChangeOutcome {
    const previousStatus = entry.record.status;
    if (previousStatus === status) return { outcome: 'unchanged', previousStatus };
    if (previousStatus === 'canceled') return { outcome: 'refused_canceled' };
    entry.record.status = status;
    return { outcome: 'changed', previousStatus };
  }

  clear(): void {
    this.byKey.clear();
    this.byId.clear();
    this.byAccount.clear();
  }
}
