import {
  ConnectorError,
  type ConnectorCallMeta,
  type ConnectorCardPage,
  type ConnectorCardRecord,
  type ConnectorCardRequest,
  type ConnectorClient,
  type ConnectorFailureKind,
  type ConnectorListQuery,
  type ConnectorReply,
  type ConnectorStatusChange,
  type ConnectorStatusResult,
} from '../../src/connector/connector-port.js';

/**
 * The connector port in memory, for inject-level tests of the card lifecycle (D43-D45): it
 * honours the contract's rules (a card belongs to one account and is unknown to the others,
 * newest first, pages stable while cards are created, canceled is final) and counts every call.
 * `failNext` makes the next calls fail as the undici adapter would report them; `misroute`
 * makes every answered record name another account (a connector bug the gateway must catch).
 */
export class MemoryConnector implements ConnectorClient {
  readonly #cards: (ConnectorCardRecord & { seq: number })[] = [];
  readonly #byKey = new Map<string, ConnectorCardRecord>();
  #seq = 0;
  #failures: { kind: ConnectorFailureKind; count: number } | undefined;
  /** Calls by operation, each with what it was asked. */
  readonly calls = {
    create: 0,
    get: [] as { account: string; cardId: string }[],
    list: [] as ConnectorListQuery[],
    status: [] as { cardId: string; change: ConnectorStatusChange }[],
  };
  misroute: string | undefined;

  constructor(private readonly now: () => number = Date.now) {}

  failNext(kind: ConnectorFailureKind, count = 1): void {
    this.#failures = { kind, count };
  }

  #maybeFail(): void {
    if (!this.#failures || this.#failures.count <= 0) return;
    this.#failures.count -= 1;
    throw new ConnectorError(this.#failures.kind);
  }

  #out(record: ConnectorCardRecord): ConnectorCardRecord {
    const { seq: _seq, ...copy } = record as ConnectorCardRecord & { seq?: number };
    return this.misroute === undefined ? copy : { ...copy, issuingAccount: this.misroute };
  }

  /** Adds a card directly (as if created earlier, through any gateway): the record as the connector keeps it. */
  add(issuingAccount: string, overrides: Partial<ConnectorCardRecord> = {}): ConnectorCardRecord {
    this.#seq += 1;
    const last4 = String(1000 + (this.#seq % 9000)).padStart(4, '0');
    const record = {
      cardId: `card_${String(this.#seq).padStart(8, '0')}`,
      pan: `400000000000${last4}`,
      cvc: String(100 + (this.#seq % 900)),
      expMonth: 11,
      expYear: 2029,
      status: 'active' as const,
      cardLimit: 10_000,
      currency: 'EUR',
      createdAt: new Date(this.now()).toISOString(),
      issuingAccount,
      requestId: `00000000-0000-4000-8000-${String(this.#seq).padStart(12, '0')}`,
      requestedCardLimit: 10_000,
      metadata: {},
      ...overrides,
      seq: this.#seq,
    };
    this.#cards.push(record);
    return this.#out(record);
  }

  async createCard(payload: ConnectorCardRequest, meta: { idempotencyKey: string; correlationId: string }): Promise<ConnectorReply> {
    this.calls.create += 1;
    this.#maybeFail();
    const earlier = this.#byKey.get(meta.idempotencyKey);
    if (earlier) return { card: earlier, replayed: true };
    const record = this.add(payload.issuingAccount, {
      requestId: payload.requestId,
      requestedCardLimit: payload.requestedCardLimit,
      cardLimit: payload.cardLimit,
      currency: payload.currency,
      metadata: payload.metadata ?? {},
    });
    this.#byKey.set(meta.idempotencyKey, record);
    return { card: record, replayed: false };
  }

  #find(account: string, cardId: string): (ConnectorCardRecord & { seq: number }) | undefined {
    return this.#cards.find((card) => card.cardId === cardId && card.issuingAccount === account);
  }

  async getCard(issuingAccount: string, cardId: string, _meta: ConnectorCallMeta): Promise<ConnectorCardRecord | null> {
    this.calls.get.push({ account: issuingAccount, cardId });
    this.#maybeFail();
    const card = this.#find(issuingAccount, cardId);
    return card ? this.#out(card) : null;
  }

  async listCards(query: ConnectorListQuery, _meta: ConnectorCallMeta): Promise<ConnectorCardPage> {
    this.calls.list.push(query);
    this.#maybeFail();
    // The cursor is the sequence number of the last card shown: later pages hold only older cards.
    const before = query.cursor === undefined ? Number.POSITIVE_INFINITY : Number(query.cursor);
    const matching = this.#cards
      .filter(
        (card) =>
          card.issuingAccount === query.issuingAccount &&
          card.seq < before &&
          (query.status === undefined || card.status === query.status) &&
          (query.createdAfter === undefined || card.createdAt >= query.createdAfter) &&
          (query.createdBefore === undefined || card.createdAt <= query.createdBefore),
      )
      .sort((a, b) => b.seq - a.seq);
    const page = matching.slice(0, query.limit);
    const more = matching.length > query.limit;
    return { data: page.map((card) => this.#out(card)), nextCursor: more ? String(page[page.length - 1]!.seq) : null };
  }

  async setCardStatus(cardId: string, change: ConnectorStatusChange, _meta: ConnectorCallMeta): Promise<ConnectorStatusResult> {
    this.calls.status.push({ cardId, change });
    this.#maybeFail();
    const card = this.#find(change.issuingAccount, cardId);
    if (!card) return { outcome: 'not_found' };
    // As the contract wants (D57): the change and what the card was before it, in one step.
    const previousStatus = card.status;
    if (previousStatus === change.status) return { outcome: 'updated', card: this.#out(card), previousStatus, changed: false };
    if (previousStatus === 'canceled') return { outcome: 'card_canceled' };
    card.status = change.status;
    return { outcome: 'updated', card: this.#out(card), previousStatus, changed: true };
  }

  async health(): Promise<void> {}
  poolLoad(): { inFlight: number; queued: number } {
    return { inFlight: 0, queued: 0 };
  }
  async close(): Promise<void> {}
}
