import type { NotBeforeStore } from '../store-types.js';
import type { RecordContext } from './record-context.js';

/** D41: one hash of credential id -> not-before instant (no TTL: it must outlive every session). */
export function redisNotBefore({ redis, prefix, guarded }: RecordContext): NotBeforeStore {
  const key = `${prefix}cred-not-before`;
  return {
    raise: (credentialId, at) => guarded(true, async () => Number(await redis.raiseNotBefore(key, credentialId, String(at)))),
    // HGETALL, a command no request sends: the periodic read is told apart from request work
    // (test/store/store-command-counts.test.ts). The hash holds one field per credential.
    read: (credentialIds) =>
      guarded(false, async () => {
        const all = await redis.hgetall(key);
        const found = new Map<string, number>();
        for (const id of credentialIds) if (Object.hasOwn(all, id)) found.set(id, Number(all[id]));
        return found;
      }),
  };
}
