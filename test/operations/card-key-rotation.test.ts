import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandboxConnector, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { rawTestConfig, testCertificatePem, writeTestConfig, type RawConfig, type WrittenConfig } from '../support/gateway-fixture.js';
import { deleteKeysWithPrefix, readIdempotency, requireRedisUrl, uniquePrefix } from '../support/redis.js';
import { HANG_GUARD_MS, waitFor } from '../support/wait.js';
import { builtEntryPoints, cardBody, killAll, loginOver, postCard, startGateway, type GatewayProcess } from './support.js';
import { decodeStoredCard } from '../../src/store/redis/card-record-codec.js';

/**
 * D37 through the real process and a real Redis: records sealed under card-record key A stay
 * revealable after a restart with key B current and A among `previousEncryptionKeys`; new
 * records carry B's key id; after a restart without A, a reveal replay of A's records answers
 * the 500 `record_unreadable` envelope (never a bare 500) with an error log line carrying its
 * correlation id, while B's records and masked replays keep working.
 */

interface Card {
  cardId: string;
  pan: string;
  cvc: string;
}

describe('card-record key rotation (D37) across restarts', () => {
  let connector: RunningSandboxConnector;
  let redis: Redis;
  let prefix: string;
  let written: WrittenConfig;
  let raw: RawConfig;
  let ca: string;
  let token: string;
  let gateway: GatewayProcess | undefined;
  const keyA = { kid: 'card-a', key: { file: 'card-a.key' } };
  const keyB = { kid: 'card-b', key: { file: 'card-b.key' } };
  /** Cards created under each key, with the PAN and CVC their creation revealed. */
  const underA: { requestId: string; card: Card }[] = [];
  const underB: { requestId: string; card: Card }[] = [];

  /** The sealed PAN and CVC of a record, as stored in Redis. */
  async function sealedSecrets(requestId: string): Promise<string> {
    const key = `${prefix}idem:{acct-eu:${requestId}}`;
    // The card is answered before its record is acknowledged: the record lands a round trip later.
    await waitFor(`the idempotency record of ${requestId}`, async () => (await readIdempotency(redis, key)).state === 'completed');
    const record = (await readIdempotency(redis, key)).fields['record'];
    expect(record, `the idempotency record of ${requestId}`).toBeDefined();
    return decodeStoredCard(record ?? '').sealedSecrets;
  }

  /** Stops the running gateway (SIGTERM, exit 0) and starts one on `cards`. */
  async function restartWith(cards: RawConfig): Promise<GatewayProcess> {
    if (gateway) {
      gateway.child.kill('SIGTERM');
      expect(await gateway.exitWithin(HANG_GUARD_MS)).toEqual({ code: 0, signal: null });
    }
    writeFileSync(written.file, stringify({ ...raw, cards }));
    gateway = await startGateway(written.file);
    return gateway;
  }

  async function create(requestId: string): Promise<Card> {
    const answer = await postCard(gateway!.httpsUrl, ca, token, cardBody({ requestId }), { reveal: true });
    expect(answer.status, answer.body).toBe(201);
    expect(answer.headers['idempotent-replayed']).toBeUndefined();
    return JSON.parse(answer.body) as Card;
  }

  const replay = (requestId: string, reveal: boolean) => postCard(gateway!.httpsUrl, ca, token, cardBody({ requestId }), { reveal });

  beforeAll(async () => {
    const url = requireRedisUrl();
    prefix = uniquePrefix('ops-card-key-rotation');
    redis = new Redis(url, { maxRetriesPerRequest: 1 });
    [connector, ca] = await Promise.all([startSandboxConnector({ host: '127.0.0.1', port: 0 }), testCertificatePem(), builtEntryPoints()]);
    raw = await rawTestConfig({
      trustedProxies: [],
      // Generous store deadlines: this checks key rotation, and a busy machine must not turn a Redis reply into a 503.
      store: { kind: 'redis', redis: { url, keyPrefix: prefix, commandTimeoutMs: 5000, connectTimeoutMs: 10_000 } },
      connector: { url: connector.url, timeoutMs: 3000 },
    });
    written = await writeTestConfig(raw);
    writeFileSync(join(written.dir, 'card-a.key'), randomBytes(32).toString('hex'), { mode: 0o600 });
    writeFileSync(join(written.dir, 'card-b.key'), randomBytes(32).toString('base64'), { mode: 0o600 });
  }, 180_000);

  afterAll(async () => {
    await killAll();
    await connector?.close();
    if (redis) {
      await deleteKeysWithPrefix(redis, prefix);
      redis.disconnect();
    }
    if (written) rmSync(written.dir, { recursive: true, force: true });
  });

  it('key A current: records are sealed with kid card-a', async () => {
    await restartWith({ encryptionKey: keyA });
    token = await loginOver(gateway!.httpsUrl, ca);
    for (let i = 0; i < 2; i += 1) {
      const requestId = randomUUID();
      underA.push({ requestId, card: await create(requestId) });
      expect(await sealedSecrets(requestId)).toMatch(/^v2\.card-a\.[\w-]+\.[\w-]+\.[\w-]+$/);
    }
  });

  it("after a restart with B current and A previous: A's records still reveal, new records carry kid card-b", async () => {
    await restartWith({ encryptionKey: keyB, previousEncryptionKeys: [keyA] });
    for (const { requestId, card } of underA) {
      const answer = await replay(requestId, true);
      expect(answer.status, answer.body).toBe(201);
      expect(answer.headers['idempotent-replayed']).toBe('true');
      expect(JSON.parse(answer.body)).toMatchObject({ cardId: card.cardId, pan: card.pan, cvc: card.cvc });
      // Nothing is re-encrypted: the record still names A.
      expect(await sealedSecrets(requestId)).toMatch(/^v2\.card-a\./);
    }
    const requestId = randomUUID();
    const card = await create(requestId);
    underB.push({ requestId, card });
    expect(await sealedSecrets(requestId)).toMatch(/^v2\.card-b\./);
    const again = await replay(requestId, true);
    expect(JSON.parse(again.body)).toMatchObject({ pan: card.pan, cvc: card.cvc });
  });

  it("after a restart without A: a reveal replay of A's record is the 500 record_unreadable envelope with an error log line", async () => {
    const running = await restartWith({ encryptionKey: keyB });
    const [{ requestId, card }] = underA as [(typeof underA)[number]];
    const answer = await replay(requestId, true);
    expect(answer.status).toBe(500);
    expect(answer.headers['content-type']).toMatch(/^application\/json/);
    const envelope = JSON.parse(answer.body) as Record<string, unknown>;
    expect(envelope).toMatchObject({ status: 500, code: 'record_unreadable', message: 'Stored card record cannot be read', details: {} });
    expect(envelope['correlationId']).toBe(answer.headers['x-correlation-id']);
    expect(answer.body).not.toContain(card.pan);

    const logged = await running.waitForLog((line) => line['correlationId'] === envelope['correlationId'] && line['level'] === 'error');
    expect(logged).toMatchObject({ code: 'record_unreadable', msg: 'request failed' });
    expect(JSON.stringify(logged)).toMatch(/no configured card-record key has id card-a/);
    expect(running.stdout()).not.toContain(card.pan);
    for (const file of ['card-a.key', 'card-b.key']) expect(running.stdout()).not.toContain(readFileSync(join(written.dir, file), 'utf8'));

    // The card exists: a replay without reveal still answers it, masked.
    const masked = await replay(requestId, false);
    expect(masked.status, masked.body).toBe(201);
    expect(JSON.parse(masked.body)).toMatchObject({ cardId: card.cardId, pan: `************${card.pan.slice(-4)}` });
    // B's records are untouched.
    const [{ requestId: bId, card: bCard }] = underB as [(typeof underB)[number]];
    const revealed = await replay(bId, true);
    expect(revealed.status, revealed.body).toBe(201);
    expect(JSON.parse(revealed.body)).toMatchObject({ pan: bCard.pan, cvc: bCard.cvc });
  });
});
