import { Redis } from 'ioredis';

/**
 * A private redis-server pushed out of memory and given it back (D54), through an admin
 * connection of the test's own. Only for servers the test started (test/support/private-redis.ts):
 * the shared one on 6379 is never reconfigured.
 */

export interface ServerMemory {
  /** `used_memory`, what Redis compares with `maxmemory` (nothing here is "not counted"). */
  used: number;
  max: number;
  /** `used_memory_dataset`: the keys and values alone, without buffers and overhead. */
  dataset: number;
  policy: string;
  keys: number;
}

export async function serverMemory(admin: Redis): Promise<ServerMemory> {
  const info = await admin.info('memory');
  const field = (name: string): string => {
    const match = new RegExp(`^${name}:(.*)$`, 'm').exec(info);
    if (!match?.[1]) throw new Error(`INFO memory has no ${name}`);
    return match[1].trim();
  };
  return {
    used: Number(field('used_memory')),
    max: Number(field('maxmemory')),
    dataset: Number(field('used_memory_dataset')),
    policy: field('maxmemory_policy'),
    keys: await admin.dbsize(),
  };
}

/** An admin connection to a private server (no offline-queue tricks: it waits for the server). */
export function adminConnection(url: string, password?: string): Redis {
  const admin = new Redis(url, { maxRetriesPerRequest: 1, connectTimeout: 2000, ...(password !== undefined && { password }) });
  admin.on('error', () => undefined);
  return admin;
}

export const FILLER_PREFIX = 'test-filler:';
/** Small values: a client's query buffer holding one (counted in used_memory) stays small beside the headroom. */
const FILLER_BYTES = 1024;

/**
 * Under the limit by less than this, a server that just refused a write could take the next one:
 * the refused command's own query buffer (a filler's kilobyte) is freed after the refusal, and
 * client buffers come and go by a few kilobytes.
 */
const PAST_THE_LIMIT_BYTES = 16 * 1024;

/**
 * `noeviction`, a `maxmemory` `headroomBytes` above what the server uses now, then filler keys
 * until Redis refuses one with OOM; then the limit is put `PAST_THE_LIMIT_BYTES` under what the
 * server uses, so that it stays out of memory while buffers come and go (a quiet run once had a
 * card write taken right after the fill). The server is out of memory, as a production Redis is
 * when its data outgrew it. Returns the limit and the number of filler keys written.
 */
export async function fillUntilOutOfMemory(admin: Redis, headroomBytes = 256 * 1024): Promise<{ maxmemory: number; fillers: number }> {
  await admin.config('SET', 'maxmemory-policy', 'noeviction');
  const maxmemory = (await serverMemory(admin)).used + headroomBytes;
  await admin.config('SET', 'maxmemory', String(maxmemory));
  const value = 'x'.repeat(FILLER_BYTES);
  for (let fillers = 0; fillers < 1_000_000; fillers += 1) {
    try {
      await admin.set(`${FILLER_PREFIX}${fillers}`, value);
    } catch (error) {
      if ((error as Error).message.startsWith('OOM')) {
        const pastTheLimit = (await serverMemory(admin)).used - PAST_THE_LIMIT_BYTES;
        await admin.config('SET', 'maxmemory', String(pastTheLimit));
        return { maxmemory: pastTheLimit, fillers };
      }
      throw error;
    }
  }
  throw new Error('the server never ran out of memory');
}

/** Deletes the filler keys (UNLINK is allowed under OOM): memory is back under the limit. */
export async function freeFillers(admin: Redis, fillers: number): Promise<void> {
  for (let from = 0; from < fillers; from += 500) {
    const keys = Array.from({ length: Math.min(500, fillers - from) }, (_, i) => `${FILLER_PREFIX}${from + i}`);
    await admin.unlink(...keys);
  }
}
