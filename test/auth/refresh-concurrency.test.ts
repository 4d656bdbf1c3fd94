import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import type { GatewayStore } from '../../src/store/store-types.js';
import { createTestGateway, login, testConfig, type TestGateway } from '../support/gateway-fixture.js';
import { createTestRedisStore, openReplicaStore } from '../support/redis.js';
import { RELAXED_LIMITS, SECOND, T0, expectUnauthorized, postRefresh, type RefreshAnswer } from '../support/auth-requests.js';

const PARALLEL = 20;

/**
 * D5: concurrent refreshes with one refresh token, inside its grace, all succeed (as
 * node-oidc-provider's test does with Promise.all), each answered the one token the first of
 * them issued; once the grace is over the token is reuse and the family dies.
 */
describe('parallel refreshes of one refresh token', () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  /** Gateways on the given stores, one config, one clock; the limiter is not what this tests. */
  async function gateways(stores: GatewayStore[]): Promise<{ all: TestGateway[]; clock: ManualClock }> {
    const config = await testConfig({ rateLimits: RELAXED_LIMITS });
    const clock = new ManualClock(T0);
    const all: TestGateway[] = [];
    for (const store of stores) {
      const gw = await createTestGateway({ config, clock, store });
      closers.push(() => gw.close());
      all.push(gw);
    }
    return { all, clock };
  }

  async function memoryStore(): Promise<GatewayStore> {
    const store = new MemoryStore();
    closers.push(() => store.close());
    return store;
  }

  async function redisStores(count: number): Promise<GatewayStore[]> {
    const first = await createTestRedisStore('auth-concurrency');
    closers.push(() => first.cleanup());
    const stores: GatewayStore[] = [first.store];
    while (stores.length < count) {
      const store = await openReplicaStore(first.prefix);
      closers.push(() => store.close());
      stores.push(store);
    }
    return stores;
  }

  async function burstThenReuse(all: TestGateway[], clock: ManualClock): Promise<void> {
    const [home] = all;
    if (!home) throw new Error('no gateway');
    const session = await login(home);
    const responses = await Promise.all(
      Array.from({ length: PARALLEL }, (_, index) => postRefresh(all[index % all.length] ?? home, session.accessToken, session.refreshToken)),
    );
    expect(responses.map((response) => response.statusCode)).toEqual(Array.from({ length: PARALLEL }, () => 200));
    const issued = responses.map((response) => response.json<RefreshAnswer>());
    // One rotation; the others, inside its grace, are answered the token it issued (D5): the
    // family has one current token, held by every request of the burst.
    expect(new Set(issued.map((answer) => answer.refreshToken)).size).toBe(1);
    expect(issued[0]!.refreshToken).not.toBe(session.refreshToken);
    expect(new Set(issued.map((answer) => answer.accessToken)).size).toBe(PARALLEL);
    expect(new Set(issued.map((answer) => answer.refreshToken.split('.')[0]))).toEqual(new Set([session.refreshToken.split('.')[0]]));
    // and that token refreshes, on any instance
    const next = await postRefresh(all[all.length - 1] ?? home, issued[0]!.accessToken, issued[0]!.refreshToken);
    expect(next.statusCode).toBe(200);
    const succeeded = all.flatMap((gw) => gw.audit.events()).filter((event) => event.event === 'refresh.succeeded');
    expect(succeeded).toHaveLength(PARALLEL + 1);

    // Grace over: the first token is reuse, and no token of the family refreshes any more.
    clock.advance(60 * SECOND);
    expectUnauthorized(await postRefresh(all[all.length - 1] ?? home, session.accessToken, session.refreshToken), 'Refresh token is revoked');
    const after = await Promise.all(
      [...issued, next.json<RefreshAnswer>()].map((answer, index) => postRefresh(all[index % all.length] ?? home, answer.accessToken, answer.refreshToken)),
    );
    for (const response of after) expectUnauthorized(response, 'Refresh token is revoked');
    const reuse = all.flatMap((gw) => gw.audit.events()).filter((event) => event.event === 'refresh.reuse_detected');
    expect(reuse).toHaveLength(1);
  }

  it(`all ${PARALLEL} succeed on the memory store, and none of the family refreshes after a reuse`, async () => {
    const { all, clock } = await gateways([await memoryStore()]);
    await burstThenReuse(all, clock);
  });

  it(`all ${PARALLEL} succeed on Redis, and none of the family refreshes after a reuse`, async () => {
    const { all, clock } = await gateways(await redisStores(1));
    await burstThenReuse(all, clock);
  });

  it(`all ${PARALLEL} succeed spread over two instances on one Redis, and none refreshes after a reuse`, async () => {
    const { all, clock } = await gateways(await redisStores(2));
    await burstThenReuse(all, clock);
  });
});
