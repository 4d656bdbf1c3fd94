import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CardSealer } from '../../src/cards/card-sealing.js';
import { decodeStoredCard } from '../../src/store/redis/card-record-codec.js';
import { createCard, expectCard, setConnectorMode, startCardFixture, validCardBody, type CardAnswer, type CardFixture } from '../support/card-fixture.js';
import { createTestRedisStore, keysWithPrefix, readIdempotency, type TestRedisStore } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/**
 * D18/D21: after cards are created, replayed and revealed on Redis, no full PAN or CVC is in
 * the logs, the audit trail, the metrics, or any value the store keeps; the store holds the
 * secrets sealed, openable only under the record's own key.
 */

let redis: TestRedisStore;
let fixture: CardFixture;
let token: string;
const revealed: CardAnswer[] = [];
const requestIds: string[] = [];

/** Every value stored under `prefix`, whatever the key's type. */
async function storedValues(client: Redis, prefix: string): Promise<Map<string, string>> {
  const values = new Map<string, string>();
  for (const key of await keysWithPrefix(client, prefix)) {
    const type = await client.type(key);
    let text: string;
    if (type === 'hash') text = JSON.stringify(await client.hgetall(key));
    else if (type === 'string') text = (await client.get(key)) ?? '';
    else if (type === 'set') text = JSON.stringify(await client.smembers(key));
    else if (type === 'zset') text = JSON.stringify(await client.zrange(key, 0, -1, 'WITHSCORES'));
    else if (type === 'list') text = JSON.stringify(await client.lrange(key, 0, -1));
    else text = `unexpected type ${type}`;
    values.set(key, text);
  }
  return values;
}

function expectFreeOfCardSecrets(text: string, where: string): void {
  for (const card of revealed) {
    expect(text.includes(card.pan), `${where} contains the PAN of ${card.cardId}`).toBe(false);
    expect(text.includes(`"cvc":"${card.cvc}"`), `${where} contains the CVC of ${card.cardId}`).toBe(false);
  }
}

beforeAll(async () => {
  redis = await createTestRedisStore('card-no-secrets');
  try {
    fixture = await startCardFixture({ store: redis.store });
  } catch (error) {
    await redis.cleanup();
    throw error;
  }
  token = await fixture.token('full');

  // Created masked, then revealed on replay.
  for (let i = 0; i < 3; i += 1) {
    const body = validCardBody({ metadata: { card_name: `card ${i}` } });
    requestIds.push(String(body['requestId']));
    expectCard(await createCard(fixture.gw, token, body));
    revealed.push(expectCard(await createCard(fixture.gw, token, body, 'revealDetails=true')));
  }
  // Created revealed, then replayed masked and revealed again.
  for (let i = 0; i < 2; i += 1) {
    const body = validCardBody({ config: { tolerance: { percentage: 10 } } });
    requestIds.push(String(body['requestId']));
    const card = expectCard(await createCard(fixture.gw, token, body, 'revealDetails=true'));
    revealed.push(card);
    expectCard(await createCard(fixture.gw, token, body));
    expect(expectCard(await createCard(fixture.gw, token, body, 'revealDetails=true'))).toEqual(card);
  }
  // A failed forward and its retry, revealed.
  await setConnectorMode(fixture.connector, { mode: 'garbage', count: 1 });
  const body = validCardBody();
  requestIds.push(String(body['requestId']));
  expect((await createCard(fixture.gw, token, body, 'revealDetails=true')).statusCode).toBe(502);
  revealed.push(expectCard(await createCard(fixture.gw, token, body, 'revealDetails=true')));
});

afterAll(async () => {
  try {
    await fixture?.close();
  } finally {
    await redis.cleanup();
  }
});

describe('no plaintext PAN or CVC anywhere the gateway writes (D18, D21)', () => {
  it('revealed full details for every card (the scan below is not vacuous)', () => {
    expect(revealed).toHaveLength(6);
    for (const card of revealed) {
      expect(card.pan).toMatch(/^\d{16}$/);
      expect(card.cvc).toMatch(/^\d{3}$/);
    }
  });

  it('not in the logs, and neither is the access token', () => {
    const logs = fixture.gw.logs.text();
    expect(logs.length).toBeGreaterThan(0);
    expectFreeOfCardSecrets(logs, 'the log');
    expect(logs.includes(token)).toBe(false);
  });

  it('not in the audit trail, which still records every reveal', () => {
    const audit = fixture.gw.audit.lines.join('\n');
    expectFreeOfCardSecrets(audit, 'the audit trail');
    expect(audit.includes(token)).toBe(false);
    const reveals = fixture.gw.audit.lines.filter((line) => line.includes('"event":"card.revealed"'));
    expect(reveals).toHaveLength(3 + 2 * 2 + 1);
  });

  it('not in the metrics', async () => {
    const metrics = await fixture.gw.gateway.admin.inject({ method: 'GET', url: '/metrics' });
    expect(metrics.statusCode).toBe(200);
    expectFreeOfCardSecrets(metrics.body, 'the metrics');
  });

  it('not in any value under the Redis prefix, where the secrets are kept sealed', async () => {
    // Cards are answered before their records are acknowledged: read once every record landed.
    await waitFor('every card record to be written', async () => {
      const stored = await Promise.all(
        [...(await storedValues(redis.client, redis.prefix)).keys()].filter((key) => key.includes('idem:')).map((key) => readIdempotency(redis.client, key)),
      );
      return stored.filter((record) => record.state === 'completed').length >= requestIds.length;
    });
    const values = await storedValues(redis.client, redis.prefix);
    expect(values.size).toBeGreaterThanOrEqual(requestIds.length);
    for (const [key, value] of values) expectFreeOfCardSecrets(value, `redis ${key}`);

    for (const [index, requestId] of requestIds.entries()) {
      const recordKey = `acct-eu:${requestId}`;
      const entry = [...values.entries()].find(([key]) => key.includes(recordKey));
      expect(entry, `no record for ${recordKey}`).toBeDefined();
      const stored = await readIdempotency(redis.client, entry?.[0] ?? '');
      expect(stored.state).toBe('completed');
      const record = decodeStoredCard(stored.fields['record'] ?? '');
      const card = revealed[index];
      expect(card).toBeDefined();
      expect(record.card.cardId).toBe(card?.cardId);
      expect(record.card.maskedPan).toBe(`************${card?.pan.slice(-4)}`);
      expect(record.card.maskedCvc).toBe('***');
      // Sealed under the record key: it opens there, and nowhere else.
      const sealer = new CardSealer(fixture.gw.config.cards.encryptionKey);
      expect(sealer.open(record.sealedSecrets, recordKey)).toEqual({ pan: card?.pan, cvc: card?.cvc });
      expect(() => sealer.open(record.sealedSecrets, `acct-uk:${requestId}`)).toThrow();
    }
  });
});
