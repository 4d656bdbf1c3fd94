import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConnectorClient } from '../../src/connector/connector-port.js';
import { startLifecycleSandbox, type LifecycleSandbox } from '../support/connector-lifecycle.js';

/**
 * Pagination stays stable while cards are created (connector contract, listing): a client paging
 * with limit=100 while 250 cards are created concurrently sees every card that existed at its
 * first page exactly once, newest first, and no card twice. Creations run over real sockets
 * while each page is fetched, and a wave completes between pages, so an offset-based cursor
 * (which would shift by the new cards) shows duplicates every run, not by chance.
 */

const ACCOUNT = 'acct-paging';
const EXISTING = 250;
const CREATED_WHILE_PAGING = 250;

let sandbox: LifecycleSandbox;
let client: ConnectorClient;

beforeAll(async () => {
  sandbox = await startLifecycleSandbox();
  client = await sandbox.client({ connections: 16 });
});
afterAll(async () => {
  await sandbox.close();
});

const create = (account = ACCOUNT) => {
  const requestId = randomUUID();
  return client.createCard(
    { requestId, issuingAccount: account, requestedCardLimit: 100, cardLimit: 100, currency: 'EUR' },
    { idempotencyKey: `${account}:${requestId}`, correlationId: 'paging' },
  );
};

describe('list pages while cards are created', () => {
  it('shows each card that existed at the first page once, newest first, with 250 created concurrently', async () => {
    const existing: string[] = [];
    for (let i = 0; i < EXISTING; i += 1) {
      const made = await create();
      existing.unshift(made.card.cardId);
      if (i % 50 === 0) await create('acct-elsewhere');
    }

    const waves = [CREATED_WHILE_PAGING / 2, CREATED_WHILE_PAGING / 2];
    const seen: Array<{ cardId: string; createdAt: string }> = [];
    let cursor: string | undefined;
    let pages = 0;
    for (;;) {
      const wave = waves.shift() ?? 0;
      const creating = Promise.all(Array.from({ length: wave }, () => create()));
      const [page] = await Promise.all([
        client.listCards({ issuingAccount: ACCOUNT, limit: 100, ...(cursor && { cursor }) }, { correlationId: 'paging' }),
        creating,
      ]);
      pages += 1;
      expect(page.data.length).toBeLessThanOrEqual(100);
      seen.push(...page.data.map(({ cardId, createdAt }) => ({ cardId, createdAt })));
      if (page.nextCursor === null) break;
      cursor = page.nextCursor;
      expect(pages, 'a cursor that never ends').toBeLessThan(10);
    }

    const seenIds = seen.map((card) => card.cardId);
    expect(new Set(seenIds).size, 'a card shown twice').toBe(seenIds.length);
    // Every card that existed before the first page, in their creation order reversed.
    expect(seenIds.filter((id) => existing.includes(id))).toEqual(existing);
    for (let i = 1; i < seen.length; i += 1) expect(Date.parse(seen[i]!.createdAt)).toBeLessThanOrEqual(Date.parse(seen[i - 1]!.createdAt));
    // The cards created meanwhile are all there on a fresh walk, newest first.
    const fresh = await client.listCards({ issuingAccount: ACCOUNT, limit: 100 }, { correlationId: 'paging' });
    expect(fresh.data.filter((card) => existing.includes(card.cardId))).toHaveLength(0);
    expect((await sandbox.stats()).cardsCreated).toBe(EXISTING + CREATED_WHILE_PAGING + EXISTING / 50);
  });
});
