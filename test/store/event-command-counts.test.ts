import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NewEvent } from '../../src/store/event-store.js';
import { createRedisClient } from '../../src/store/redis/redis-client.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { startPrivateRedis, type PrivateRedis } from '../support/private-redis.js';
import { TEST_COMMAND_TIMEOUT_MS, uniquePrefix } from '../support/redis.js';
import { recordSends } from '../support/redis-sends.js';
import { waitFor } from '../support/wait.js';

/**
 * What recording an event costs the store (D66): one round trip of one script, and with
 * `replicasToAck` the WAIT in the same send (idempotency.ts does the same for a card record).
 * Counted at the client's socket (each send one round trip when awaited) and with INFO
 * commandstats on a master of this file's own, with a replica of its own.
 */
const WEEK = 7 * 24 * 60 * 60 * 1000;
const ENDPOINT = 'ep-1';

function eventOf(account: string, dedupe?: string): NewEvent {
  const id = `evt_${randomUUID().replaceAll('-', '').slice(0, 26).toUpperCase()}`;
  return {
    id,
    type: 'card.created',
    cardId: 'card_1',
    createdAt: Date.now(),
    head: `{"id":"${id}","type":"card.created","createdAt":"${new Date().toISOString()}","issuingAccount":"${account}","sequence":`,
    tail: ',"data":{"card":{"cardId":"card_1","status":"active"}}}',
    ...(dedupe === undefined ? {} : { dedupe }),
    endpoints: [ENDPOINT],
  };
}

/** Calls of each command the server ran since the last CONFIG RESETSTAT, inside scripts included. */
async function commandCalls(admin: Redis): Promise<Record<string, number>> {
  const text = await admin.info('commandstats');
  const calls: Record<string, number> = {};
  for (const match of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    const name = match[1]!;
    if (!/^(info|config|ping|client|hello)(\||$)/.test(name)) calls[name] = Number(match[2]);
  }
  return calls;
}

describe('store commands per event record', () => {
  let master: PrivateRedis;
  let replica: PrivateRedis;
  let admin: Redis;
  let replicaAdmin: Redis;
  const opened: RedisStore[] = [];

  beforeAll(async () => {
    [master, replica] = await Promise.all([startPrivateRedis(), startPrivateRedis()]);
    admin = new Redis(master.url, { maxRetriesPerRequest: 1 });
    replicaAdmin = new Redis(replica.url, { maxRetriesPerRequest: 1 });
    for (const client of [admin, replicaAdmin]) client.on('error', () => undefined);
    // the copy from the master loaded straight from the socket: no dump.rdb in the working directory
    await replicaAdmin.call('CONFIG', 'SET', 'repl-diskless-load', 'swapdb');
    await replicaAdmin.call('REPLICAOF', '127.0.0.1', String(master.port));
    await waitFor('the replica to follow its master', async () => /^master_link_status:up/m.test(await replicaAdmin.info('replication')));
  }, 30_000);

  afterAll(async () => {
    await Promise.all(opened.map((store) => store.close()));
    admin?.disconnect();
    replicaAdmin?.disconnect();
    await Promise.all([master?.stop(), replica?.stop()]);
  });

  async function openStore(replicasToAck: number) {
    const client = createRedisClient({ url: master.url, commandTimeoutMs: TEST_COMMAND_TIMEOUT_MS, connectTimeoutMs: 5_000 });
    const store = new RedisStore(client, uniquePrefix('event-counts'), {
      commandTimeoutMs: TEST_COMMAND_TIMEOUT_MS,
      deadlineMs: TEST_COMMAND_TIMEOUT_MS + 2_000,
      replicasToAck,
    });
    opened.push(store);
    await waitFor('the store to answer', () =>
      store.ping().then(
        () => true,
        () => false,
      ),
    );
    return { store, sends: recordSends(client) };
  }

  /** Records `n` events after one warm-up (which loads the script); answers the sends of the client per record and the commands the server ran. */
  async function measure(store: RedisStore, sends: ReturnType<typeof recordSends>, n: number, dedupe: boolean) {
    const account = `acct-${randomUUID().slice(0, 8)}`;
    const record = () => store.events.record(account, eventOf(account, dedupe ? randomUUID() : undefined), { now: Date.now(), expiresAt: Date.now() + WEEK });
    await record();
    sends.clear();
    await admin.call('CONFIG', 'RESETSTAT');
    for (let i = 0; i < n; i += 1) expect(await record()).toMatchObject({ state: 'recorded', sequence: i + 2 });
    const own = sends.sends.filter((names) => !names.every((name) => name === 'ping' || name === 'info'));
    const calls = await commandCalls(admin);
    return { sends: own, calls };
  }

  it('records in one round trip: one script, the whole record (dedupe, sequence, event, log, delivery) inside it', async () => {
    const { store, sends } = await openStore(0);
    const n = 20;
    const plain = await measure(store, sends, n, false);
    expect(plain.sends).toEqual(Array(n).fill(['evalsha']));
    expect(plain.calls).toMatchObject({ evalsha: n, incr: n, set: n, zscore: n });
    expect(plain.calls['wait']).toBeUndefined();
    const deduped = await measure(store, sends, n, true);
    expect(deduped.sends).toEqual(Array(n).fill(['evalsha']));
    // the dedupe's look-up and its mark
    expect(deduped.calls).toMatchObject({ evalsha: n, get: n, set: 2 * n });
    const perRecord = (calls: Record<string, number>) =>
      Object.entries(calls)
        .filter(([name]) => name !== 'evalsha')
        .map(([name, count]) => `${name} ${count / n}`)
        .join(', ');
    console.info(`[event record] 1 round trip, 1 script running: ${perRecord(plain.calls)}; with a dedupe: ${perRecord(deduped.calls)}`);
  });

  it('with replicasToAck, WAIT rides in the same send as the record: still one round trip, every record acknowledged', async () => {
    const { store, sends } = await openStore(1);
    const n = 20;
    const { sends: seen, calls } = await measure(store, sends, n, false);
    expect(seen).toEqual(Array(n).fill(['evalsha', 'wait']));
    expect(calls).toMatchObject({ evalsha: n, wait: n });
    expect(store.describe().unacknowledgedRecords).toBe(0);
  });
});
