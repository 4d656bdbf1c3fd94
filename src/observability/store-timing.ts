import type { GatewayStore } from '../store/store-types.js';
import type { GatewayMetrics, StoreOperation } from './metrics.js';

/**
 * The store, timed: each operation observes `gateway_store_command_duration_seconds`, failures
 * included, whatever the implementation. A decorator, so neither store knows about metrics.
 */
export function instrumentStore(store: GatewayStore, metrics: GatewayMetrics): GatewayStore {
  const children = new Map<StoreOperation, { observe(value: number): void }>();
  const timed = <A extends unknown[], R>(operation: StoreOperation, work: (...args: A) => Promise<R>) => {
    let child = children.get(operation);
    if (!child) children.set(operation, (child = metrics.storeCommandDuration.labels({ operation })));
    const histogram = child;
    return (...args: A): Promise<R> => {
      const started = performance.now();
      const done = () => histogram.observe((performance.now() - started) / 1000);
      const result = work(...args);
      result.then(done, done);
      return result;
    };
  };
  const { sessions, idempotency, lockouts, notBefore, events } = store;
  return {
    sessions: {
      createFamily: timed('create_family', (input) => sessions.createFamily(input)),
      // The undo of a login's family write (the login failed): timed with it.
      discardFamily: timed('create_family', (familyId) => sessions.discardFamily(familyId)),
      rotate: timed('rotate', (input) => sessions.rotate(input)),
      revokeFamily: timed('revoke', (input) => sessions.revokeFamily(input)),
    },
    idempotency: {
      reserve: timed('reserve', (key, input) => idempotency.reserve(key, input)),
      peek: timed('peek', (key, now) => idempotency.peek(key, now)),
      complete: timed('complete', (key, input) => idempotency.complete(key, input)),
      release: timed('release', (key, input) => idempotency.release(key, input)),
    },
    lockouts: {
      recordFailure: timed('lockout', (key, input) => lockouts.recordFailure(key, input)),
      read: timed('lockout', (key, now) => lockouts.read(key, now)),
      reset: timed('lockout', (key) => lockouts.reset(key)),
    },
    notBefore: {
      raise: timed('not_before', (credentialId, at) => notBefore.raise(credentialId, at)),
      read: timed('not_before', (credentialIds) => notBefore.read(credentialIds)),
    },
    events: {
      record: timed('events.record', (issuingAccount, event, times) => events.record(issuingAccount, event, times)),
      scan: timed('events.read', (issuingAccount, options) => events.scan(issuingAccount, options)),
      get: timed('events.read', (issuingAccount, eventId) => events.get(issuingAccount, eventId)),
      claimDue: timed('events.claim', (endpoint, options) => events.claimDue(endpoint, options)),
      settle: timed('events.settle', (endpoint, eventId, owner, settlement, times) => events.settle(endpoint, eventId, owner, settlement, times)),
      deliveries: timed('events.deliveries', (endpoint, options) => events.deliveries(endpoint, options)),
      delivery: timed('events.deliveries', (endpoint, eventId) => events.delivery(endpoint, eventId)),
      redeliver: timed('events.redeliver', (endpoint, eventIds, now) => events.redeliver(endpoint, eventIds, now)),
      backlog: timed('events.backlog', (endpoint) => events.backlog(endpoint)),
    },
    createRateLimiter: (options) => {
      const limiter = store.createRateLimiter(options);
      return { consume: timed('limiter', (key: string) => limiter.consume(key)) };
    },
    ping: timed('ping', () => store.ping()),
    describe: () => store.describe(),
    subscribe: (listener) => store.subscribe(listener),
    close: () => store.close(),
  };
}
