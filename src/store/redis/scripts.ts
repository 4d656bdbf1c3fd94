import { RateLimiterRedis } from 'rate-limiter-flexible';
import { EVENT_SCRIPTS } from './event-scripts.js';
import type { StoreClient } from './redis-client.js';

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
 *
 * Every script is declared with a `#!lua` shebang and no flags (Redis 7): Redis then knows it
 * before it runs as a script that may write and may not run out of memory, and refuses it with
 * OOM before its first command when memory is over `maxmemory` (D54). Without the declaration
 * Redis checks memory only at a script's first write, and only if that command is one that
 * grows memory: a script that starts with DEL then writes past the limit.
 * rate-limiter-flexible's own script (rlflxIncr) starts with SET, which Redis checks: refused
 * just the same (test/store/out-of-memory.test.ts runs each under OOM). A script that only reads
 * says so (`flags=no-writes`): it still answers when memory is full, and may run on a replica.
 */
const SHEBANG = '#!lua';
/** First lines of a guarded script: past its deadline (its last ARGV, epoch ms) by Redis's clock, it answers `stale`. */
const STALE_GUARD = `
local clock = redis.call('TIME')
if tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000) > tonumber(ARGV[#ARGV]) then return 'stale' end`;

/**
 * Reads an idempotency record (idempotency-values.ts) into one table, whichever way it is kept:
 * the string of this version or the hash of an earlier one (a rolling upgrade).
 */
const LOAD_IDEMPOTENCY = `
local function loadIdempotency(key)
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'string' then
    local v = redis.call('GET', key)
    local state = string.sub(v, 1, 1)
    if state == 'c' then
      local at = string.find(v, '|', 3, true)
      return {state = 'completed', exp = string.sub(v, 3, at - 1), record = string.sub(v, at + 1)}
    end
    local r = cjson.decode(string.sub(v, 3))
    r.state = (state == 'p') and 'pending' or 'released'
    return r
  end
  if kind == 'hash' then
    local h = redis.call('HMGET', key, 'state', 'owner', 'leaseExp', 'exp', 'record', 'ofp', 'oreq', 'ocred', 'prev')
    return {state = h[1], owner = h[2], leaseExp = h[3], exp = h[4], record = h[5], ofp = h[6], oreq = h[7], ocred = h[8], prev = h[9]}
  end
  return {}
end`;

/**
 * Where a presented refresh token stands in its family record (sessions.ts): `current` (the
 * family's generation, its hash), `previous` (one generation before, its hash), `older` (any
 * generation before that: no hash is kept, none is needed to call it reuse) or nil, a token the
 * family never issued. `f` is the record's HMGET in the order of FAMILY_FIELDS.
 */
const FAMILY_FIELDS = `'cred', 'rev', 'fp', 'login', 'end', 'gen', 'ch', 'ce', 'cs', 'ph', 'pe', 'rot'`;
const STANDING = `
local function standingOf(f, generation, hash)
  local gen, current = tonumber(generation), tonumber(f[6])
  if gen == current then return (f[7] == hash) and 'current' or nil end
  if gen == current - 1 then return (f[10] == hash) and 'previous' or nil end
  if gen < current - 1 then return 'older' end
  return nil
end`;

const SCRIPTS = {
  /*
   * A family is one hash of constant size however often it rotates (issue 35): `gen` the current
   * generation; `ch`, `ce`, `cs` its token's hash, expiry and secret sealed under the previous
   * token (refresh-token.ts); `ph`, `pe` the previous generation's hash and expiry; `rot` the
   * instant the previous one was rotated (its grace runs from there, D5); and what D41 binds
   * the session to: `cred`, `fp`, `login`, `end`. `rev` is '1' once revoked.
   *
   * Why two generations are enough (D5): every refresh of the previous token within its grace
   * is answered the current token again (the seal), so however many requests race, the family
   * has one current token and they all hold it; a sibling never rotates anything, so it never
   * makes another sibling reuse. Only a rotation of the current token moves the family on, and
   * then the token it replaced is the one in its grace. A token older than the previous one has
   * had a successor, which has had one too: presenting it is reuse.
   */
  // KEYS: family. ARGV: credentialId, now, graceMs, newExpiresAt, ttlMs, fingerprint, notBefore, generation, tokenHash, nextHash, nextSealed, deadline
  rotateRefresh: {
    numberOfKeys: 1,
    lua: `${STALE_GUARD}
${STANDING}
local f = redis.call('HMGET', KEYS[1], ${FAMILY_FIELDS})
if not f[1] then return {'unknown'} end
local standing = standingOf(f, ARGV[8], ARGV[9])
if not standing then return {'unknown'} end
if f[1] ~= ARGV[1] then return {'mismatch'} end
if f[2] == '1' then return {'revoked'} end
-- the session ended with its credential's secret (D41): made under another fingerprint, or
-- logged in before the credential's not-before instant. It stays dead whatever comes next.
if f[3] ~= ARGV[6] or tonumber(f[4]) < tonumber(ARGV[7]) then
  redis.call('HSET', KEYS[1], 'rev', '1')
  return {'ended'}
end
local now = tonumber(ARGV[2])
if tonumber(f[5]) <= now then return {'expired'} end
if standing == 'current' then
  if tonumber(f[8]) <= now then return {'expired'} end
  -- the new token lives its own lifetime, never past the session's absolute end (D41)
  local exp = ARGV[4]
  if tonumber(f[5]) < tonumber(exp) then exp = f[5] end
  -- the presented token becomes the previous generation; its grace starts now
  redis.call('HSET', KEYS[1], 'gen', tostring(tonumber(f[6]) + 1), 'ch', ARGV[10], 'ce', exp, 'cs', ARGV[11], 'ph', f[7], 'pe', f[8], 'rot', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  return {'rotated', exp}
end
if standing == 'previous' then
  if tonumber(f[11]) <= now then return {'expired'} end
  -- within the grace from its rotation: a sibling, answered the current token (sealed under it)
  if now < tonumber(f[12]) + tonumber(ARGV[3]) then return {'sibling', f[8], f[9], f[7]} end
end
-- past the grace, or older: reuse, the whole family dies (D5)
redis.call('HSET', KEYS[1], 'rev', '1')
return {'reuse'}`,
  },
  // KEYS: family. ARGV: credentialId, now, graceMs, fingerprint, notBefore, generation, tokenHash, deadline
  revokeFamily: {
    numberOfKeys: 1,
    lua: `${STALE_GUARD}
${STANDING}
local f = redis.call('HMGET', KEYS[1], ${FAMILY_FIELDS})
if not f[1] then return 'unknown' end
local standing = standingOf(f, ARGV[6], ARGV[7])
if not standing then return 'unknown' end
if f[1] ~= ARGV[1] then return 'mismatch' end
if f[2] == '1' then return 'already-revoked' end
-- ended with its credential's secret (D41): revoked, and answered as such
if f[3] ~= ARGV[4] or tonumber(f[4]) < tonumber(ARGV[5]) then
  redis.call('HSET', KEYS[1], 'rev', '1')
  return 'ended'
end
local now = tonumber(ARGV[2])
if tonumber(f[5]) <= now then return 'expired' end
if standing == 'current' and tonumber(f[8]) <= now then return 'expired' end
if standing == 'previous' and tonumber(f[11]) <= now then return 'expired' end
-- a token past its grace (or older) presented anywhere is reuse (D5): the family dies all the same
redis.call('HSET', KEYS[1], 'rev', '1')
if standing == 'current' or (standing == 'previous' and now < tonumber(f[12]) + tonumber(ARGV[3])) then return 'revoked' end
return 'rotated-out'`,
  },
  /*
   * The records of refresh tokens issued before issue 35 (no generation in the token): a family
   * hash and one hash per token, each rotated token kept until its own expiry. Served as that
   * version served them until those sessions end (sessionMaxAgeHours after the upgrade); a
   * later version can drop these two scripts.
   */
  // KEYS: family, presented token, new token. ARGV: credentialId, now, graceMs, newExpiresAt, ttlMs, fingerprint, notBefore, deadline
  rotateLegacyRefresh: {
    numberOfKeys: 3,
    lua: `${STALE_GUARD}
local fam = redis.call('HMGET', KEYS[1], 'cred', 'revoked', 'fp', 'login', 'end')
local tok = redis.call('HMGET', KEYS[2], 'exp', 'rotatedAt')
if not fam[1] or not tok[1] then return {'unknown'} end
if fam[1] ~= ARGV[1] then return {'mismatch'} end
if fam[2] == '1' then return {'revoked'} end
if fam[3] ~= ARGV[6] or tonumber(fam[4] or '0') < tonumber(ARGV[7]) then
  redis.call('HSET', KEYS[1], 'revoked', '1')
  return {'ended'}
end
local now = tonumber(ARGV[2])
if tonumber(tok[1]) <= now or tonumber(fam[5] or '0') <= now then return {'expired'} end
if tok[2] and now >= tonumber(tok[2]) + tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[1], 'revoked', '1')
  return {'reuse'}
end
if not tok[2] then redis.call('HSET', KEYS[2], 'rotatedAt', ARGV[2]) end
local exp = ARGV[4]
if tonumber(fam[5]) < tonumber(exp) then exp = fam[5] end
redis.call('HSET', KEYS[3], 'exp', exp)
redis.call('PEXPIRE', KEYS[3], ARGV[5])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[5]) then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
return {'rotated', exp}`,
  },
  // KEYS: family, presented token. ARGV: credentialId, now, graceMs, fingerprint, notBefore, deadline
  revokeLegacyFamily: {
    numberOfKeys: 2,
    lua: `${STALE_GUARD}
local fam = redis.call('HMGET', KEYS[1], 'cred', 'revoked', 'fp', 'login')
local tok = redis.call('HMGET', KEYS[2], 'exp', 'rotatedAt')
if not fam[1] or not tok[1] then return 'unknown' end
if fam[1] ~= ARGV[1] then return 'mismatch' end
if fam[2] == '1' then return 'already-revoked' end
if fam[3] ~= ARGV[4] or tonumber(fam[4] or '0') < tonumber(ARGV[5]) then
  redis.call('HSET', KEYS[1], 'revoked', '1')
  return 'ended'
end
local now = tonumber(ARGV[2])
if tonumber(tok[1]) <= now then return 'expired' end
redis.call('HSET', KEYS[1], 'revoked', '1')
if tok[2] and now >= tonumber(tok[2]) + tonumber(ARGV[3]) then return 'rotated-out' end
return 'revoked'`,
  },
  // The claim's slow path (idempotency.ts claims a free key with a plain SET NX): a key that
  // holds a released attempt, a lapsed claim, an expired record or our own claim re-sent.
  // KEYS: record. ARGV: owner, now, leaseExpiresAt, ttlMs, fingerprint, requestedCardLimit, credentialId, deadline
  reserveIdempotency: {
    numberOfKeys: 1,
    lua: `${STALE_GUARD}
${LOAD_IDEMPOTENCY}
local r = loadIdempotency(KEYS[1])
local now = tonumber(ARGV[2])
if r.state == 'completed' and tonumber(r.exp) > now then return {'completed', r.record} end
if r.state == 'pending' and tonumber(r.leaseExp) > now then
  -- our own claim seen again (a re-sent claim): still ours
  if r.owner == ARGV[1] then return {'reserved', r.prev, r.ofp, r.oreq, r.ocred} end
  return {'pending', r.leaseExp}
end
-- nothing live. A released attempt, or a lease whose gateway died, may have made the card at
-- the connector: the new claim carries that first attempt forward (D31).
local prev, ofp, oreq, ocred = '0', ARGV[5], ARGV[6], ARGV[7]
if r.ofp and ((r.state == 'released' and tonumber(r.exp) > now) or r.state == 'pending') then
  prev, ofp, oreq, ocred = '1', r.ofp, r.oreq, r.ocred
end
redis.call('SET', KEYS[1], 'p|' .. cjson.encode({owner = ARGV[1], leaseExp = ARGV[3], ofp = ofp, oreq = oreq, ocred = ocred, prev = prev}), 'PX', ARGV[4])
return {'reserved', prev, ofp, oreq, ocred}`,
  },
  // One SET on the way (with GET): the record replaces our own claim, a released attempt or
  // nothing; a completed record or another owner's claim is put back as it was.
  // KEYS: record. ARGV: owner, value (idempotency-values.ts), ttlMs, now
  completeIdempotency: {
    numberOfKeys: 1,
    lua: `
local old = redis.pcall('SET', KEYS[1], ARGV[2], 'PX', ARGV[3], 'GET')
if not old then return 1 end
if type(old) == 'table' then
  -- WRONGTYPE: the hash of an earlier version, checked the way that version did
  local r = redis.call('HMGET', KEYS[1], 'state', 'owner')
  if r[1] == 'completed' or (r[1] == 'pending' and r[2] ~= ARGV[1]) then return 0 end
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
local kind = string.sub(old, 1, 1)
local ends
if kind == 'c' then
  ends = tonumber(string.sub(old, 3, string.find(old, '|', 3, true) - 1))
elseif kind == 'p' then
  local claim = cjson.decode(string.sub(old, 3))
  if claim.owner == ARGV[1] then return 1 end
  ends = tonumber(claim.leaseExp)
else
  return 1
end
redis.call('SET', KEYS[1], old, 'PX', math.max(1000, ends - tonumber(ARGV[4]) + 60000))
return 0`,
  },
  // KEYS: record. ARGV: owner, keepUntil, ttlMs
  releaseIdempotency: {
    numberOfKeys: 1,
    lua: `
${LOAD_IDEMPOTENCY}
local r = loadIdempotency(KEYS[1])
if r.state == 'pending' and r.owner == ARGV[1] then
  -- the key is free; its first attempt is remembered for a retry (D31)
  redis.call('SET', KEYS[1], 'r|' .. cjson.encode({exp = ARGV[2], ofp = r.ofp, oreq = r.oreq, ocred = r.ocred}), 'PX', ARGV[3])
  return 1
end
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
  // KEYS: the not-before hash. ARGV: credentialId, at. Raises, never lowers (D41); answers the instant stored.
  raiseNotBefore: {
    numberOfKeys: 1,
    lua: `
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if stored and tonumber(stored) >= tonumber(ARGV[2]) then return stored end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return ARGV[2]`,
  },
} as const;

const ALL_SCRIPTS: Readonly<Record<string, { numberOfKeys: number; lua: string; flags?: 'no-writes' }>> = { ...SCRIPTS, ...EVENT_SCRIPTS };

type ScriptName = keyof typeof SCRIPTS | keyof typeof EVENT_SCRIPTS;
/** The client with every script of SCRIPTS as a command of its own name. */
export type ScriptedClient = StoreClient & { [K in ScriptName]: (...args: (string | number)[]) => Promise<unknown> };
export type ScriptedPipeline = ReturnType<StoreClient['pipeline']> & {
  completeIdempotency(...args: string[]): ScriptedPipeline;
  recordEvent(...args: string[]): ScriptedPipeline;
};

/**
 * Defines every script on `client` (once per client: stores sharing one client share them), each
 * behind the `#!lua` shebang, so that Redis checks memory before any of them runs (D54).
 */
export function defineScripts(client: StoreClient): ScriptedClient {
  for (const [name, script] of Object.entries(ALL_SCRIPTS)) {
    const shebang = script.flags ? `${SHEBANG} flags=${script.flags}` : SHEBANG;
    if (!(name in client)) client.defineCommand(name, { numberOfKeys: script.numberOfKeys, lua: `${shebang}\n${script.lua.trimStart()}` });
  }
  // rate-limiter-flexible defines its script (rlflxIncr) on the client when a limiter is made.
  // ioredis copies a client's scripts into an automatic pipeline when the pipeline is opened:
  // a script defined while one is open (the health monitor's PING, another request) is missing
  // from it, and its call fails and derails the whole pipeline. Define it now, before any command.
  if (!('rlflxIncr' in client)) new RateLimiterRedis({ storeClient: client, points: 1, duration: 1 });
  return client as ScriptedClient;
}

/** A guarded script that arrived after its deadline did nothing: for the caller, the store failed. */
export function notStale<T>(answer: unknown): T {
  if (answer === 'stale') throw new Error('script arrived after its deadline; nothing was changed');
  return answer as T;
}
