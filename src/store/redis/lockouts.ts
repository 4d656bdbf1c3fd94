import type { LockoutStore } from '../store-types.js';
import type { RecordContext } from './record-context.js';

/** Failed-login lockouts (D11a): one hash `lock:{subject}` of failures and lock-out end. */
export function redisLockouts({ redis, prefix, guarded }: RecordContext): LockoutStore {
  const key = (name: string) => `${prefix}lock:{${name}}`;
  return {
    recordFailure: (name, { now, maxFailures, lockoutMs }) =>
      guarded(true, async () =>
        Number(await redis.recordLoginFailure(key(name), String(now), String(maxFailures), String(now + lockoutMs), String(lockoutMs + 60_000))),
      ),
    read: (name, now) =>
      guarded(false, async () => {
        const [until, failures] = await redis.hmget(key(name), 'lockedUntil', 'failures');
        return { lockedUntil: Number(until ?? 0) > now ? Number(until) : 0, failures: Number(failures ?? 0) };
      }),
    reset: (name) =>
      guarded(false, async () => {
        await redis.del(key(name));
      }),
  };
}
