import type { EventStore } from '../event-store.js';

/** Placeholder until the Redis scripts land (next commit on this branch): every call rejects. */
export function redisEvents(): EventStore {
  const notYet = (): Promise<never> => Promise.reject(new Error('the Redis event store is not written yet'));
  return {
    record: notYet,
    scan: notYet,
    get: notYet,
    claimDue: notYet,
    settle: notYet,
    deliveries: notYet,
    delivery: notYet,
    redeliver: notYet,
    backlog: notYet,
  };
}
