import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { storeContract } from './store-contract.js';

storeContract(
  'memory',
  async () => {
    const store = new MemoryStore();
    return { store, cleanup: () => store.close() };
  },
  'memory',
);

describe('MemoryStore: events end with their retention, on the store clock', () => {
  const DAY = 24 * 60 * 60 * 1000;
  const account = 'acct-a';
  const endpoint = { issuingAccount: account, endpointId: 'ep-1' };
  const eventOf = (id: string, createdAt: number) => ({
    id,
    type: 'card.created' as const,
    cardId: 'card_1',
    createdAt,
    head: `{"id":"${id}","type":"card.created","sequence":`,
    tail: ',"data":{}}',
    dedupe: `dedupe-${id}`,
    endpoints: [endpoint.endpointId],
  });

  it('keeps an event until expiresAt + 60 s (as the Redis TTL does), then neither reads, scans, claims nor dedupes it, and the sweep frees it', async () => {
    const clock = new ManualClock();
    const store = new MemoryStore(() => clock.now());
    try {
      const now = clock.now();
      await store.events.record(account, eventOf('evt_gone', now), { now, expiresAt: now + DAY });
      await store.events.record(account, eventOf('evt_kept', now), { now, expiresAt: now + 2 * DAY });
      clock.set(now + DAY + 60_000 - 1);
      expect(await store.events.get(account, 'evt_gone')).toMatchObject({ sequence: 1 });
      clock.set(now + DAY + 60_000);
      expect(await store.events.get(account, 'evt_gone')).toBeUndefined();
      expect((await store.events.scan(account, { limit: 10 })).map((event) => event.id)).toEqual(['evt_kept']);
      expect(
        await store.events.record(
          account,
          { ...eventOf('evt_again', clock.now()), dedupe: 'dedupe-evt_gone' },
          { now: clock.now(), expiresAt: clock.now() + DAY },
        ),
      ).toEqual({
        state: 'recorded',
        id: 'evt_again',
        sequence: 3,
      });
      expect((await store.events.claimDue(endpoint, { now: clock.now(), leaseMs: 1000, limit: 10, owner: 'gw-a' })).map((claimed) => claimed.eventId)).toEqual([
        'evt_kept',
        'evt_again',
      ]);
      expect(await store.events.delivery(endpoint, 'evt_gone')).toBeUndefined();
      store.sweep();
      expect(store.events.accounts.get(account)?.log.map((event) => event.id)).toEqual(['evt_kept', 'evt_again']);
      // the gone event's dedupe now names the event recorded again under it
      expect(Object.fromEntries([...(store.events.accounts.get(account)?.dedupe ?? [])].map(([dedupe, mark]) => [dedupe, mark.id]))).toEqual({
        'dedupe-evt_gone': 'evt_again',
        'dedupe-evt_kept': 'evt_kept',
      });
    } finally {
      await store.close();
    }
  });
});
