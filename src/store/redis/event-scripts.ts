/*
 * The event log and the delivery queues (D66) as Lua scripts, defined with the others
 * (scripts.ts). Every key of one issuing account shares the hash tag `{ev:<account>}`, and every
 * script names one key, the account's log (`<prefix>{ev:<account>}log`): the others are built
 * from it inside the script, in the same slot. One key for every script, whatever it touches:
 * ioredis's automatic pipelining on a Cluster groups script calls by their number of keys, and a
 * call whose count differs from its definition's breaks the pipeline.
 *
 * Keys after the account's base `<prefix>{ev:<account>}`:
 *   seq           the account's last sequence (no TTL: a receiver orders by it, D63)
 *   log           sorted set, sequence -> event id (trimmed lazily: an entry goes once its event has)
 *   e:<id>        the event's JSON (event-codec.ts), expiring with its retention
 *   x:<dedupe>    the sequence of the connector's event recorded under this dedupe (D64), as long
 *   q:<endpoint>  sorted set of pending deliveries, due instant -> event id (a claim: its lease end)
 *   f:<endpoint>  sorted set of failed deliveries, keepUntil -> event id
 *   s:<endpoint>  hash, event id -> `attempts|owner|failedAt|lastError`, for a delivery attempted
 *                 at least once (a fresh delivery is its q entry alone)
 * A key that holds entries outlives its longest-lived one, by up to an hour (PEXPIRE only ever
 * extends).
 */

/** The base of the account's keys (KEYS[1] less `log`), and the helpers every script shares. */
const PREAMBLE = `
local base = string.sub(KEYS[1], 1, -4)
-- an hour more than it needs: the next hour's records need not extend it again
local function outlive(key, ttl)
  local left = redis.call('PTTL', key)
  if left == -1 or (left >= 0 and left < ttl) then redis.call('PEXPIRE', key, ttl + 3600000) end
end
local function stateOf(value)
  if not value then return 0, '', '', '' end
  local a = string.find(value, '|', 1, true)
  local b = string.find(value, '|', a + 1, true)
  local c = string.find(value, '|', b + 1, true)
  return tonumber(string.sub(value, 1, a - 1)), string.sub(value, a + 1, b - 1), string.sub(value, b + 1, c - 1), string.sub(value, c + 1)
end
local function stateValue(attempts, owner, failedAt, lastError)
  return tostring(attempts) .. '|' .. owner .. '|' .. failedAt .. '|' .. lastError
end
-- failed deliveries past their keepUntil are dropped (no one may redeliver them any more)
local function dropFailed(f, s, now)
  local gone = redis.call('ZRANGEBYSCORE', f, '-inf', now)
  if #gone > 0 then
    redis.call('ZREM', f, unpack(gone))
    redis.call('HDEL', s, unpack(gone))
  end
end`;

export const EVENT_SCRIPTS = {
  // A re-sent record (ioredis after a reconnect, the repair queue) finds its own event and
  // answers it again; a connector event whose dedupe is known answers the first one (D64).
  // KEYS: log. ARGV: eventId, head, tail, dedupe ('' for none), ttlMs, createdAt, endpointId...
  recordEvent: {
    numberOfKeys: 1,
    lua: `${PREAMBLE}
local id = ARGV[1]
local seen = redis.call('ZSCORE', KEYS[1], id)
if seen and redis.call('EXISTS', base .. 'e:' .. id) == 1 then return {'recorded', id, seen} end
if ARGV[4] ~= '' then
  local first = redis.call('GET', base .. 'x:' .. ARGV[4])
  if first then
    local ids = redis.call('ZRANGEBYSCORE', KEYS[1], first, first)
    if ids[1] and redis.call('EXISTS', base .. 'e:' .. ids[1]) == 1 then return {'repeat', ids[1], first} end
  end
end
local ttl = tonumber(ARGV[5])
local seq = tostring(redis.call('INCR', base .. 'seq'))
redis.call('SET', base .. 'e:' .. id, ARGV[2] .. seq .. ARGV[3], 'PX', ttl)
redis.call('ZADD', KEYS[1], seq, id)
outlive(KEYS[1], ttl)
if ARGV[4] ~= '' then redis.call('SET', base .. 'x:' .. ARGV[4], seq, 'PX', ttl) end
for i = 7, #ARGV do
  local q = base .. 'q:' .. ARGV[i]
  redis.call('ZADD', q, ARGV[6], id)
  outlive(q, ttl)
end
-- the log's oldest entries whose event has expired, a few per record: the log keeps pace
for _, old in ipairs(redis.call('ZRANGE', KEYS[1], 0, 7)) do
  if redis.call('EXISTS', base .. 'e:' .. old) == 1 then break end
  redis.call('ZREM', KEYS[1], old)
end
return {'recorded', id, seq}`,
  },
  // Newest first, below a sequence; an id whose event has expired is skipped (the log is trimmed lazily).
  // KEYS: log. ARGV: beforeSequence ('(<n>', or '+inf' for none), limit. Answers {eventId, sequence, json}...
  scanEvents: {
    numberOfKeys: 1,
    flags: 'no-writes',
    lua: `${PREAMBLE}
local limit = tonumber(ARGV[2])
local found = {}
local before = ARGV[1]
while #found < 3 * limit do
  local page = redis.call('ZREVRANGEBYSCORE', KEYS[1], before, '-inf', 'WITHSCORES', 'LIMIT', 0, limit - #found / 3)
  if #page == 0 then break end
  for i = 1, #page, 2 do
    local json = redis.call('GET', base .. 'e:' .. page[i])
    if json then
      table.insert(found, page[i])
      table.insert(found, page[i + 1])
      table.insert(found, json)
    end
    before = '(' .. page[i + 1]
  end
end
return found`,
  },
  // KEYS: log. ARGV: eventId. Answers {sequence, json} or nothing.
  getEvent: {
    numberOfKeys: 1,
    flags: 'no-writes',
    lua: `${PREAMBLE}
local json = redis.call('GET', base .. 'e:' .. ARGV[1])
local seq = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not json or not seq then return {} end
return {seq, json}`,
  },
  // Due deliveries, earliest first, each leased to the owner until now + leaseMs: the attempt is
  // counted now, so one lost with its replica counts too. A delivery whose event has expired is dropped.
  // KEYS: log. ARGV: endpointId, now, leaseMs, limit, owner. Answers {eventId, attempts, json}...
  claimDeliveries: {
    numberOfKeys: 1,
    lua: `${PREAMBLE}
local q, f, s = base .. 'q:' .. ARGV[1], base .. 'f:' .. ARGV[1], base .. 's:' .. ARGV[1]
local now, limit = tonumber(ARGV[2]), tonumber(ARGV[4])
local leaseEnd = now + tonumber(ARGV[3])
dropFailed(f, s, now)
local claimed = {}
while #claimed < 3 * limit do
  local due = redis.call('ZRANGEBYSCORE', q, '-inf', now, 'LIMIT', 0, limit - #claimed / 3)
  if #due == 0 then break end
  for _, id in ipairs(due) do
    local json = redis.call('GET', base .. 'e:' .. id)
    if json then
      local attempts, _, _, lastError = stateOf(redis.call('HGET', s, id))
      redis.call('ZADD', q, leaseEnd, id)
      redis.call('HSET', s, id, stateValue(attempts + 1, ARGV[5], '', lastError))
      table.insert(claimed, id)
      table.insert(claimed, tostring(attempts))
      table.insert(claimed, json)
    else
      redis.call('ZREM', q, id)
      redis.call('HDEL', s, id)
    end
  end
end
if #claimed > 0 then outlive(s, redis.call('PTTL', q)) end
return claimed`,
  },
  // Only the claim's owner settles (its lease may have run out and another replica taken it over).
  // KEYS: log. ARGV: endpointId, eventId, owner, kind (delivered|retry|failed), now, dueAt or keepUntil, error, ttlMs of a failed one
  settleDelivery: {
    numberOfKeys: 1,
    lua: `${PREAMBLE}
local q, f, s = base .. 'q:' .. ARGV[1], base .. 'f:' .. ARGV[1], base .. 's:' .. ARGV[1]
local id = ARGV[2]
dropFailed(f, s, tonumber(ARGV[5]))
if not redis.call('ZSCORE', q, id) then return 0 end
local attempts, owner = stateOf(redis.call('HGET', s, id))
if owner ~= ARGV[3] then return 0 end
if ARGV[4] == 'delivered' then
  redis.call('ZREM', q, id)
  redis.call('HDEL', s, id)
elseif ARGV[4] == 'retry' then
  redis.call('ZADD', q, ARGV[6], id)
  redis.call('HSET', s, id, stateValue(attempts, '', '', ARGV[7]))
else
  redis.call('ZREM', q, id)
  redis.call('ZADD', f, ARGV[6], id)
  redis.call('HSET', s, id, stateValue(attempts, '', ARGV[5], ARGV[7]))
  local ttl = tonumber(ARGV[8])
  outlive(f, ttl)
  outlive(s, ttl)
end
return 1`,
  },
  // Oldest first: pending by due instant, failed by keepUntil. Answers {eventId, score, state}...
  // KEYS: log. ARGV: endpointId, state (pending|failed), limit
  listDeliveries: {
    numberOfKeys: 1,
    flags: 'no-writes',
    lua: `${PREAMBLE}
local set = base .. (ARGV[2] == 'failed' and 'f:' or 'q:') .. ARGV[1]
local entries = redis.call('ZRANGE', set, 0, tonumber(ARGV[3]) - 1, 'WITHSCORES')
local found = {}
for i = 1, #entries, 2 do
  table.insert(found, entries[i])
  table.insert(found, entries[i + 1])
  table.insert(found, redis.call('HGET', base .. 's:' .. ARGV[1], entries[i]) or '')
end
return found`,
  },
  // KEYS: log. ARGV: endpointId, eventId. Answers {state, score, state value} or nothing.
  readDelivery: {
    numberOfKeys: 1,
    flags: 'no-writes',
    lua: `${PREAMBLE}
local state = redis.call('HGET', base .. 's:' .. ARGV[1], ARGV[2]) or ''
local due = redis.call('ZSCORE', base .. 'q:' .. ARGV[1], ARGV[2])
if due then return {'pending', due, state} end
local keep = redis.call('ZSCORE', base .. 'f:' .. ARGV[1], ARGV[2])
if keep then return {'failed', keep, state} end
return {}`,
  },
  // Due now again, attempts reset (the last error is kept for the operator). A delivery whose
  // event has expired is dropped, not counted. KEYS: log. ARGV: endpointId, now, all-failed|ids, eventId...
  redeliver: {
    numberOfKeys: 1,
    lua: `${PREAMBLE}
local q, f, s = base .. 'q:' .. ARGV[1], base .. 'f:' .. ARGV[1], base .. 's:' .. ARGV[1]
local now = tonumber(ARGV[2])
dropFailed(f, s, now)
local ids = {}
if ARGV[3] == 'all-failed' then
  ids = redis.call('ZRANGE', f, 0, -1)
else
  for i = 4, #ARGV do ids[#ids + 1] = ARGV[i] end
end
local found = 0
for _, id in ipairs(ids) do
  if redis.call('ZSCORE', q, id) or redis.call('ZSCORE', f, id) then
    local ttl = redis.call('PTTL', base .. 'e:' .. id)
    redis.call('ZREM', f, id)
    if ttl > 0 then
      local _, _, _, lastError = stateOf(redis.call('HGET', s, id))
      redis.call('ZADD', q, ARGV[2], id)
      outlive(q, ttl)
      if lastError ~= '' then
        redis.call('HSET', s, id, stateValue(0, '', '', lastError))
        outlive(s, ttl)
      else
        redis.call('HDEL', s, id)
      end
      found = found + 1
    else
      redis.call('ZREM', q, id)
      redis.call('HDEL', s, id)
    end
  end
end
return found`,
  },
  // KEYS: log. ARGV: endpointId. Answers {pending, failed, earliest due or ''}.
  deliveryBacklog: {
    numberOfKeys: 1,
    flags: 'no-writes',
    lua: `${PREAMBLE}
local q = base .. 'q:' .. ARGV[1]
local first = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
return {redis.call('ZCARD', q), redis.call('ZCARD', base .. 'f:' .. ARGV[1]), first[2] or ''}`,
  },
} as const;
