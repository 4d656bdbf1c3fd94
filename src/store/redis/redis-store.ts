import type { Redis } from 'ioredis';
import { RateLimiterRedis, type RateLimiterAbstract } from 'rate-limiter-flexible';
import {
  StoreUnavailableError,
  type GatewayStore,
  type IdempotencyStore,
  type LimiterOptions,
  type LockoutStore,
  type Reservation,
  type RevokeOutcome,
  type RotateOutcome,
  type SessionStore,
  type StoredCard,
  type TokenRef,
} from '../store-types.js';

/*
 * Every multi-step change is one Lua script, so concurrent refreshes, logouts and card
 * creations on different replicas serialise inside Redis. Instants are passed in from the
 * gateway's clock and kept in the records; PEXPIRE only frees memory. The scripts check state
 * before writing, so ioredis re-sending one after a reconnect changes nothing twice. All keys
 * of one script share a hash tag ({family} or {account:requestId}).
 *
 * The scripts whose effect the client must know about (rotation, logout, idempotency claim)
 * also carry a deadline: a command that reaches a paused or stopped Redis times out at the
 * gateway (503), but would still run when Redis resumes, rotating or revoking behind the
 * client's back. Past its deadline, by Redis's own clock, such a script does nothing.
 */
const STALE_GUARD = `
local clock = redis.call('TIME')
if tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000) > tonumber(ARGV[#ARGV]) then return 'stale' end`;
const SCRIPTS = {
  // KEYS: family, presented token, new token. ARGV: credentialId, now, graceMs, newExpiresAt, ttlMs, deadline
  rotateRefresh: {
    numberOfKeys: 3,
    lua: `${STALE_GUARD}
local fam = redis.call('HMGET', KEYS[1], 'cred', 'revoked')
local tok = redis.call('HMGET', KEYS[2], 'exp', 'rotatedAt')
if not fam[1] or not tok[1] then return 'unknown' end
if fam[1] ~= ARGV[1] then return 'mismatch' end
if fam[2] == '1' then return 'revoked' end
local now = tonumber(ARGV[2])
if tonumber(tok[1]) <= now then return 'expired' end
-- past the grace after its first rotation: reuse, the whole family dies (D5)
if tok[2] and now >= tonumber(tok[2]) + tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[1], 'revoked', '1')
  return 'reuse'
end
-- the grace runs from the first rotation only
if not tok[2] then redis.call('HSET', KEYS[2], 'rotatedAt', ARGV[2]) end
redis.call('HSET', KEYS[3], 'exp', ARGV[4])
redis.call('PEXPIRE', KEYS[3], ARGV[5])
-- the family outlives its newest token
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[5]) then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
return 'rotated'`,
  },
  // KEYS: family, presented token. ARGV: credentialId, now, graceMs, deadline
  revokeFamily: {
    numberOfKeys: 2,
    lua: `${STALE_GUARD}
local fam = redis.call('HMGET', KEYS[1], 'cred', 'revoked')
local tok = redis.call('HMGET', KEYS[2], 'exp', 'rotatedAt')
if not fam[1] or not tok[1] then return 'unknown' end
if fam[1] ~= ARGV[1] then return 'mismatch' end
if fam[2] == '1' then return 'already-revoked' end
local now = tonumber(ARGV[2])
if tonumber(tok[1]) <= now then return 'expired' end
-- a token past its grace presented anywhere is reuse (D5): the family dies all the same
redis.call('HSET', KEYS[1], 'revoked', '1')
if tok[2] and now >= tonumber(tok[2]) + tonumber(ARGV[3]) then return 'rotated-out' end
return 'revoked'`,
  },
  // KEYS: record. ARGV: owner, now, leaseExpiresAt, ttlMs, deadline
  reserveIdempotency: {
    numberOfKeys: 1,
    lua: `${STALE_GUARD}
local r = redis.call('HMGET', KEYS[1], 'state', 'owner', 'leaseExp', 'exp', 'record')
local now = tonumber(ARGV[2])
if r[1] == 'completed' and tonumber(r[4]) > now then return {'completed', r[5]} end
if r[1] == 'pending' and tonumber(r[3]) > now then
  -- our own claim seen again (a re-sent script): still ours
  if r[2] == ARGV[1] then return {'reserved'} end
  return {'pending', r[3]}
end
-- nothing live: an expired record or a lease whose gateway died is taken over
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', 'pending', 'owner', ARGV[1], 'leaseExp', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {'reserved'}`,
  },
  // KEYS: record. ARGV: owner, record JSON, expiresAt, ttlMs
  completeIdempotency: {
    numberOfKeys: 1,
    lua: `
local r = redis.call('HMGET', KEYS[1], 'state', 'owner')
if r[1] == 'completed' then return 0 end
if r[1] == 'pending' and r[2] ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', 'completed', 'exp', ARGV[3], 'record', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1`,
  },
  // KEYS: record. ARGV: owner
  releaseIdempotency: {
    numberOfKeys: 1,
    lua: `
local r = redis.call('HMGET', KEYS[1], 'state', 'owner')
if r[1] == 'pending' and r[2] == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`,
  },
  // KEYS: lockout record. ARGV: now, maxFailures, lockedUntil if this failure locks, ttlMs
  recordLoginFailure: {
    numberOfKeys: 1,
    lua: `
local lockedUntil = redis.call('HGET', KEYS[1], 'lockedUntil')
if lockedUntil and tonumber(lockedUntil) > tonumber(ARGV[1]) then return '0' end
local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
if failures >= tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'failures', '0', 'lockedUntil', ARGV[3])
  return ARGV[3]
end
return '0'`,
  },
} as const;

type ScriptName = keyof typeof SCRIPTS;
type ScriptedRedis = Redis & { [K in ScriptName]: (...args: (string | number)[]) => Promise<unknown> };

/** Cleanup TTL: the record's own expiry plus a minute of slack. */
const ttlFor = (expiresAt: number, now: number): number => Math.max(1000, expiresAt - now + 60_000);

async function guarded<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw new StoreUnavailableError(error);
  }
}

export class RedisStore implements GatewayStore {
  readonly sessions: SessionStore;
  readonly idempotency: IdempotencyStore;
  readonly lockouts: LockoutStore;
  readonly #redis: ScriptedRedis;
  readonly #prefix: string;
  readonly #ownsClient: boolean;
  readonly #deadlineMs: number;

  /**
   * `prefix` namespaces one environment's keys (D8), e.g. `gw:sandbox:`. `deadlineMs` is how
   * long after sending a guarded script may still act: the command timeout plus slack for the
   * clock difference between gateway and Redis hosts.
   */
  constructor(client: Redis, prefix: string, options: { ownsClient?: boolean; deadlineMs?: number } = {}) {
    for (const [name, script] of Object.entries(SCRIPTS)) {
      if (!(name in client)) client.defineCommand(name, { numberOfKeys: script.numberOfKeys, lua: script.lua });
    }
    this.#redis = client as ScriptedRedis;
    this.#prefix = prefix;
    this.#ownsClient = options.ownsClient ?? true;
    this.#deadlineMs = options.deadlineMs ?? 2000;
    this.sessions = this.#sessions();
    this.idempotency = this.#idempotency();
    this.lockouts = this.#lockouts();
  }

  get client(): Redis {
    return this.#redis;
  }

  /** Wall-clock time, not the injected clock: it is compared with Redis's TIME, not with records. */
  #deadline(): string {
    return String(Date.now() + this.#deadlineMs);
  }

  #familyKey(familyId: string): string {
    return `${this.#prefix}fam:{${familyId}}`;
  }

  #tokenKey(token: TokenRef): string {
    return `${this.#prefix}rt:{${token.familyId}}:${token.tokenHash}`;
  }

  #sessions(): SessionStore {
    const redis = this.#redis;
    return {
      createFamily: ({ token, credentialId, expiresAt, now }) =>
        guarded(async () => {
          const ttl = ttlFor(expiresAt, now);
          await redis
            .multi()
            .hset(this.#familyKey(token.familyId), 'cred', credentialId, 'revoked', '0')
            .pexpire(this.#familyKey(token.familyId), ttl)
            .hset(this.#tokenKey(token), 'exp', String(expiresAt))
            .pexpire(this.#tokenKey(token), ttl)
            .exec();
        }),
      rotate: ({ token, credentialId, newTokenHash, newExpiresAt, now, graceMs }) =>
        guarded(async () =>
          notStale<RotateOutcome>(
            await redis.rotateRefresh(
              this.#familyKey(token.familyId),
              this.#tokenKey(token),
              this.#tokenKey({ familyId: token.familyId, tokenHash: newTokenHash }),
              credentialId,
              String(now),
              String(graceMs),
              String(newExpiresAt),
              String(ttlFor(newExpiresAt, now)),
              this.#deadline(),
            ),
          ),
        ),
      revokeFamily: ({ token, credentialId, now, graceMs }) =>
        guarded(async () =>
          notStale<RevokeOutcome>(
            await redis.revokeFamily(this.#familyKey(token.familyId), this.#tokenKey(token), credentialId, String(now), String(graceMs), this.#deadline()),
          ),
        ),
    };
  }

  #idempotency(): IdempotencyStore {
    const redis = this.#redis;
    const key = (name: string) => `${this.#prefix}idem:{${name}}`;
    return {
      reserve: async (name, { owner, now, leaseMs }) => {
        try {
          const answer = notStale<string[]>(await redis.reserveIdempotency(key(name), owner, String(now), String(now + leaseMs), String(leaseMs + 60_000), this.#deadline()));
          return parseReservation(answer);
        } catch (error) {
          // A claim that timed out may still run when a paused Redis resumes (inside the
          // deadline's slack). A release sent right behind it on the same connection runs after
          // it and undoes it, so the client's retry is not held in 409 until the lease ends.
          redis.releaseIdempotency(key(name), owner).catch(() => undefined);
          throw new StoreUnavailableError(error);
        }
      },
      peek: (name, now) =>
        guarded(async () => {
          const [state, leaseExp, exp, record] = await redis.hmget(key(name), 'state', 'leaseExp', 'exp', 'record');
          if (state === 'completed' && Number(exp) > now && record) return { state: 'completed', record: JSON.parse(record) as StoredCard };
          if (state === 'pending' && Number(leaseExp) > now) return { state: 'pending', leaseExpiresAt: Number(leaseExp) };
          return { state: 'reserved' };
        }),
      complete: (name, { owner, record, expiresAt, now }) =>
        guarded(async () => {
          await redis.completeIdempotency(key(name), owner, JSON.stringify(record), String(expiresAt), String(ttlFor(expiresAt, now)));
        }),
      release: (name, owner) =>
        guarded(async () => {
          await redis.releaseIdempotency(key(name), owner);
        }),
    };
  }

  #lockouts(): LockoutStore {
    const redis = this.#redis;
    const key = (name: string) => `${this.#prefix}lock:{${name}}`;
    return {
      recordFailure: (name, { now, maxFailures, lockoutMs }) =>
        guarded(async () => Number(await redis.recordLoginFailure(key(name), String(now), String(maxFailures), String(now + lockoutMs), String(lockoutMs + 60_000)))),
      lockedUntil: (name, now) =>
        guarded(async () => {
          const until = Number((await redis.hget(key(name), 'lockedUntil')) ?? 0);
          return until > now ? until : 0;
        }),
      reset: (name) =>
        guarded(async () => {
          await redis.del(key(name));
        }),
    };
  }

  createRateLimiter({ keyPrefix, points, durationSeconds }: LimiterOptions): RateLimiterAbstract {
    return new RateLimiterRedis({
      storeClient: this.#redis,
      keyPrefix: `${this.#prefix}${keyPrefix}`,
      points,
      duration: durationSeconds,
      // Without this it waits for ioredis to reconnect instead of failing (pitfalls.md).
      rejectIfRedisNotReady: true,
    });
  }

  async ping(): Promise<void> {
    await guarded(() => this.#redis.ping());
  }

  async close(): Promise<void> {
    if (!this.#ownsClient) return;
    try {
      await this.#redis.quit();
    } catch {
      this.#redis.disconnect();
    }
  }
}

/** A guarded script that arrived after its deadline did nothing: for the caller, the store failed. */
function notStale<T>(answer: unknown): T {
  if (answer === 'stale') throw new Error('script arrived after its deadline; nothing was changed');
  return answer as T;
}

function parseReservation(answer: string[]): Reservation {
  const [state, value] = answer;
  if (state === 'completed' && value) return { state: 'completed', record: JSON.parse(value) as StoredCard };
  if (state === 'pending') return { state: 'pending', leaseExpiresAt: Number(value) };
  return { state: 'reserved' };
}
