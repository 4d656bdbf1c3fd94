import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { Cluster, Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { withDeadline } from '../../foundation/deadline.js';
import { limiterResult } from '../limiter-result.js';
import {
  noFailedOperations,
  StoreUnavailableError,
  type GatewayStore,
  type StoreFailure,
  type StoreFailureReason,
  type StoreDescription,
  type StoreEvent,
  type StoreTopology,
  type IdempotencyStore,
  type Limiter,
  type LimiterOptions,
  type LockoutStore,
  type Reservation,
  type NotBeforeStore,
  type RevokeOutcome,
  type RotateResult,
  type SessionStore,
  type StoredCard,
  type TokenRef,
} from '../store-types.js';
import type { StoreClient } from './redis-client.js';
import { evictingPolicies, judgeServers, memoryUsedRatio, nameFailure, NOT_CONNECTED, parseServerInfo, type ServerState } from './server-state.js';

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
 * just the same (test/store/out-of-memory.test.ts runs each under OOM).
 */
const SHEBANG = '#!lua';
const STALE_GUARD = `
local clock = redis.call('TIME')
if tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000) > tonumber(ARGV[#ARGV]) then return 'stale' end`;
const SCRIPTS = {
  // KEYS: family, presented token, new token. ARGV: credentialId, now, graceMs, newExpiresAt, ttlMs, fingerprint, notBefore, deadline
  rotateRefresh: {
    numberOfKeys: 3,
    lua: `${STALE_GUARD}
local fam = redis.call('HMGET', KEYS[1], 'cred', 'revoked', 'fp', 'login', 'end')
local tok = redis.call('HMGET', KEYS[2], 'exp', 'rotatedAt')
if not fam[1] or not tok[1] then return {'unknown'} end
if fam[1] ~= ARGV[1] then return {'mismatch'} end
if fam[2] == '1' then return {'revoked'} end
-- the session ended with its credential's secret (D41): made under another fingerprint, or
-- logged in before the credential's not-before instant. It stays dead whatever comes next.
if fam[3] ~= ARGV[6] or tonumber(fam[4] or '0') < tonumber(ARGV[7]) then
  redis.call('HSET', KEYS[1], 'revoked', '1')
  return {'ended'}
end
local now = tonumber(ARGV[2])
if tonumber(tok[1]) <= now or tonumber(fam[5] or '0') <= now then return {'expired'} end
-- past the grace after its first rotation: reuse, the whole family dies (D5)
if tok[2] and now >= tonumber(tok[2]) + tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[1], 'revoked', '1')
  return {'reuse'}
end
-- the grace runs from the first rotation only
if not tok[2] then redis.call('HSET', KEYS[2], 'rotatedAt', ARGV[2]) end
-- the new token lives its own lifetime, never past the session's absolute end (D41)
local exp = ARGV[4]
if tonumber(fam[5]) < tonumber(exp) then exp = fam[5] end
redis.call('HSET', KEYS[3], 'exp', exp)
redis.call('PEXPIRE', KEYS[3], ARGV[5])
-- the family outlives its newest token
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[5]) then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
return {'rotated', exp}`,
  },
  // KEYS: family, presented token. ARGV: credentialId, now, graceMs, fingerprint, notBefore, deadline
  revokeFamily: {
    numberOfKeys: 2,
    lua: `${STALE_GUARD}
local fam = redis.call('HMGET', KEYS[1], 'cred', 'revoked', 'fp', 'login')
local tok = redis.call('HMGET', KEYS[2], 'exp', 'rotatedAt')
if not fam[1] or not tok[1] then return 'unknown' end
if fam[1] ~= ARGV[1] then return 'mismatch' end
if fam[2] == '1' then return 'already-revoked' end
-- ended with its credential's secret (D41): revoked, and answered as such
if fam[3] ~= ARGV[4] or tonumber(fam[4] or '0') < tonumber(ARGV[5]) then
  redis.call('HSET', KEYS[1], 'revoked', '1')
  return 'ended'
end
local now = tonumber(ARGV[2])
if tonumber(tok[1]) <= now then return 'expired' end
-- a token past its grace presented anywhere is reuse (D5): the family dies all the same
redis.call('HSET', KEYS[1], 'revoked', '1')
if tok[2] and now >= tonumber(tok[2]) + tonumber(ARGV[3]) then return 'rotated-out' end
return 'revoked'`,
  },
  // KEYS: record. ARGV: owner, now, leaseExpiresAt, ttlMs, fingerprint, requestedCardLimit, credentialId, deadline
  reserveIdempotency: {
    numberOfKeys: 1,
    lua: `${STALE_GUARD}
local r = redis.call('HMGET', KEYS[1], 'state', 'owner', 'leaseExp', 'exp', 'record', 'ofp', 'oreq', 'ocred', 'prev')
local now = tonumber(ARGV[2])
if r[1] == 'completed' and tonumber(r[4]) > now then return {'completed', r[5]} end
if r[1] == 'pending' and tonumber(r[3]) > now then
  -- our own claim seen again (a re-sent script): still ours
  if r[2] == ARGV[1] then return {'reserved', r[9], r[6], r[7], r[8]} end
  return {'pending', r[3]}
end
-- nothing live. A released attempt, or a lease whose gateway died, may have made the card at
-- the connector: the new claim carries that first attempt forward (D31).
local prev, ofp, oreq, ocred = '0', ARGV[5], ARGV[6], ARGV[7]
if r[6] and ((r[1] == 'released' and tonumber(r[4]) > now) or r[1] == 'pending') then
  prev, ofp, oreq, ocred = '1', r[6], r[7], r[8]
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', 'pending', 'owner', ARGV[1], 'leaseExp', ARGV[3], 'ofp', ofp, 'oreq', oreq, 'ocred', ocred, 'prev', prev)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {'reserved', prev, ofp, oreq, ocred}`,
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
  // KEYS: record. ARGV: owner, keepUntil, ttlMs
  releaseIdempotency: {
    numberOfKeys: 1,
    lua: `
local r = redis.call('HMGET', KEYS[1], 'state', 'owner')
if r[1] == 'pending' and r[2] == ARGV[1] then
  -- the key is free; its first attempt is remembered for a retry (D31)
  redis.call('HSET', KEYS[1], 'state', 'released', 'exp', ARGV[2])
  redis.call('HDEL', KEYS[1], 'owner', 'leaseExp')
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
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

type ScriptName = keyof typeof SCRIPTS;
type ScriptedClient = StoreClient & { [K in ScriptName]: (...args: (string | number)[]) => Promise<unknown> };
type ScriptedPipeline = ReturnType<StoreClient['pipeline']> & { completeIdempotency(...args: string[]): ScriptedPipeline };

/** Cleanup TTL: the record's own expiry plus a minute of slack. */
const ttlFor = (expiresAt: number, now: number): number => Math.max(1000, expiresAt - now + 60_000);

const storeLate = () => new Error('store command timed out');

/** Unknown-outcome idempotency writes kept for repair at most (the oldest go first: their claims lapse anyway). */
const MAX_REPAIRS = 10_000;
/** How long a repair is retried at most; past it a claim has lapsed and a record is covered by the connector's Idempotency-Key. */
const REPAIR_HORIZON_MS = 10 * 60_000;
/** Health checks while the store is up and nothing waits for repair; faster while down or repairing. */
const MONITOR_INTERVAL_MS = 1000;
const FAST_MONITOR_INTERVAL_MS = 250;
/** Servers whose INFO a health check reads, for the state of each (D54): memory, policy, role. */
const INFO_SECTIONS = ['memory', 'replication'] as const;
/** A failed request triggers a health check at most this often (one line per change, not per request). */
const SUSPECT_DEBOUNCE_MS = 200;

/**
 * An idempotency write whose reply never came: the gateway answered 503, but the script may have
 * run (or may still run, when a re-sent command reaches Redis late). Settled once the store
 * answers again, and not before the write itself can no longer run (its deadline).
 */
interface Repair {
  kind: 'release' | 'complete';
  key: string;
  args: string[];
  /** Wall-clock ms: not before the original script's deadline has passed. */
  notBefore: number;
  giveUpAt: number;
}

export interface RedisStoreOptions {
  /** close() quits the client (default true). */
  ownsClient?: boolean;
  /** How long after sending a guarded script may still act: the command timeout plus clock slack. */
  deadlineMs?: number;
  commandTimeoutMs?: number;
  /** D35: replicas that must acknowledge a card record (WAIT) before the client is answered. */
  replicasToAck?: number;
  /** Overrides the detected topology (only the label: detection is by the client's kind). */
  topology?: Exclude<StoreTopology, 'memory'>;
  /**
   * D54, a master whose `maxmemory-policy` evicts keys: `refuse` (production) counts the store
   * as down (`evicting_policy`: not ready); `warn` (default) serves and emits one
   * `evicting-policy` event per change, for a warning.
   */
  evictingPolicy?: 'refuse' | 'warn';
  /** Health-check periods while up / while down or repairing (default 1000 / 250 ms). */
  monitorIntervalMs?: number;
  fastMonitorIntervalMs?: number;
}

/** `host:port` of every slot range's master, in slot order, from the client's slot map. */
interface ShardRange {
  start: number;
  end: number;
  master: string;
}

function shardRanges(cluster: Cluster): ShardRange[] {
  const ranges: ShardRange[] = [];
  let current: ShardRange | undefined;
  for (let slot = 0; slot < 16384; slot += 1) {
    const master = cluster.slots[slot]?.[0];
    if (master === undefined) {
      current = undefined;
    } else if (current && current.master === master) {
      current.end = slot;
    } else {
      current = { start: slot, end: slot, master };
      ranges.push(current);
    }
  }
  return ranges;
}

const masterAt = (ranges: readonly ShardRange[], slot: number): string | undefined => ranges.find((range) => slot >= range.start && slot <= range.end)?.master;

export class RedisStore implements GatewayStore {
  readonly sessions: SessionStore;
  readonly idempotency: IdempotencyStore;
  readonly lockouts: LockoutStore;
  readonly notBefore: NotBeforeStore;
  readonly #redis: ScriptedClient;
  readonly #prefix: string;
  readonly #ownsClient: boolean;
  readonly #deadlineMs: number;
  readonly #commandTimeoutMs: number;
  readonly #replicasToAck: number;
  readonly #topology: Exclude<StoreTopology, 'memory'>;
  readonly #refuseEvicting: boolean;
  readonly #monitorIntervalMs: number;
  readonly #fastMonitorIntervalMs: number;

  // State seen by the health monitor: one event per change.
  #up: boolean | undefined;
  #failure: StoreFailure = { reason: 'unreachable', detail: 'no answer yet' };
  /** The client's last connection error since it was last ready (NOAUTH, WRONGPASS, ECONNREFUSED...). */
  #connectionError: Error | undefined;
  #evictingPolicy: string | undefined;
  #memoryUsedRatio: number | undefined;
  /** Redis refused a write with OOM, and memory has not had room since (server-state.ts's margin). */
  #refusedWrites = false;
  readonly #failedOperations = noFailedOperations();
  #checking: Promise<StoreFailure | undefined> | undefined;
  /** A check was asked for while one ran (a reconnection, a success while down): one more after it. */
  #recheck = false;
  #lastCheckAt = 0;
  #monitor: NodeJS.Timeout | undefined;
  #closed = false;
  readonly #listeners = new Set<(event: StoreEvent) => void>();

  // Masters: Sentinel's (from the connection) or the Cluster's (per slot range).
  #masters: readonly string[] = [];
  /** Sentinel only: a connection to one sentinel, asked every tick which server is the master. */
  #sentinel: Redis | undefined;
  #sentinelIndex = 0;
  #ranges: ShardRange[] = [];
  #masterChanges = 0;

  // D35 replicasToAck.
  #replicasBehind = false;
  #unacknowledged = 0;

  readonly #repairs = new Map<string, Repair>();
  #repairing = false;
  #repairTimer: NodeJS.Timeout | undefined;

  /**
   * `prefix` namespaces one environment's keys (D8), e.g. `gw:sandbox:`. `deadlineMs` is how
   * long after sending a guarded script may still act: the command timeout plus slack for the
   * clock difference between gateway and Redis hosts.
   */
  constructor(client: StoreClient, prefix: string, options: RedisStoreOptions = {}) {
    for (const [name, script] of Object.entries(SCRIPTS)) {
      if (!(name in client)) client.defineCommand(name, { numberOfKeys: script.numberOfKeys, lua: `${SHEBANG}\n${script.lua.trimStart()}` });
    }
    // rate-limiter-flexible defines its script (rlflxIncr) on the client when a limiter is made.
    // ioredis copies a client's scripts into an automatic pipeline when the pipeline is opened:
    // a script defined while one is open (the health monitor's PING, another request) is missing
    // from it, and its call fails and derails the whole pipeline. Define it now, before any command.
    if (!('rlflxIncr' in client)) new RateLimiterRedis({ storeClient: client, points: 1, duration: 1 });
    this.#redis = client as ScriptedClient;
    this.#prefix = prefix;
    this.#ownsClient = options.ownsClient ?? true;
    this.#deadlineMs = options.deadlineMs ?? 2000;
    this.#commandTimeoutMs = options.commandTimeoutMs ?? 300;
    this.#replicasToAck = options.replicasToAck ?? 0;
    this.#refuseEvicting = options.evictingPolicy === 'refuse';
    this.#monitorIntervalMs = options.monitorIntervalMs ?? MONITOR_INTERVAL_MS;
    this.#fastMonitorIntervalMs = options.fastMonitorIntervalMs ?? FAST_MONITOR_INTERVAL_MS;
    this.#topology = options.topology ?? (client instanceof Cluster ? 'cluster' : (client.options.sentinels?.length ?? 0) > 0 ? 'sentinel' : 'standalone');
    this.sessions = this.#sessions();
    this.idempotency = this.#idempotency();
    this.lockouts = this.#lockouts();
    this.notBefore = this.#notBefore();
    this.#watch(client);
    // A client still connecting is checked when it is ready (or when its connection fails), not
    // before: a check now would only find it not connected yet.
    this.#schedule(client.status === 'ready' ? 0 : this.#fastMonitorIntervalMs);
  }

  get client(): StoreClient {
    return this.#redis;
  }

  // ---------------------------------------------------------------- state, masters, events

  describe(): StoreDescription {
    return {
      topology: this.#topology,
      up: this.#up === true,
      masters: this.#masters,
      masterChanges: this.#masterChanges,
      unacknowledgedRecords: this.#unacknowledged,
      pendingRepairs: this.#repairs.size,
      failure: this.#up === false ? this.#failure : undefined,
      evictingPolicy: this.#evictingPolicy,
      memoryUsedRatio: this.#memoryUsedRatio,
      failedOperations: { ...this.#failedOperations },
    };
  }

  subscribe(listener: (event: StoreEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #emit(event: StoreEvent): void {
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch {
        // a listener's failure is its own
      }
    }
  }

  /**
   * Connection events only prompt a health check; the check decides (one event per change).
   * Attached in the constructor, in the same turn as the client was made: ioredis connects on a
   * later turn, so even the first connection error (a wrong password at start) is kept.
   */
  #watch(client: StoreClient): void {
    // Without a listener ioredis prints every failed reconnect attempt; the monitor reports instead.
    client.on('error', (error: Error) => this.#connectionFailed(error));
    client.on('end', () => this.#suspect());
    if (client instanceof Cluster) {
      client.on('node error', (error: Error) => this.#connectionFailed(error));
      client.on('-node', () => this.#suspect());
      client.on('refresh', () => this.#clusterRefreshed(client));
      client.on('ready', () => {
        this.#connected();
        this.#clusterRefreshed(client);
      });
      return;
    }
    if (this.#topology === 'standalone') {
      this.#masters = [`${client.options.host ?? '127.0.0.1'}:${client.options.port ?? 6379}`];
      // Reconnected: served again from now on, so said so now, not at the next scheduled check.
      client.on('ready', () => this.#connected());
      return;
    }
    client.on('ready', () => {
      // The server this connection reached: Sentinel's master at the time of connecting.
      const { remoteAddress, remotePort } = client.stream;
      if (remoteAddress === undefined || remotePort === undefined) return;
      const master = remoteAddress.includes(':') ? `[${remoteAddress}]:${remotePort}` : `${remoteAddress}:${remotePort}`;
      const previous = this.#masters[0];
      this.#masters = [master];
      if (previous !== undefined && previous !== master) {
        this.#masterChanges += 1;
        this.#emit({ kind: 'master-changed', from: previous, to: master });
      }
      this.#connected();
    });
  }

  /** A connection attempt failed, saying why: checked now (attempts come at most every 50 to 500 ms). */
  #connectionFailed(error: Error): void {
    this.#connectionError = error;
    this.#checkSoon();
  }

  /** (Re)connected: served again from now on, so checked now, not at the next scheduled check. */
  #connected(): void {
    this.#connectionError = undefined;
    this.#checkSoon();
  }

  /** A new slot map: one event per slot range whose master changed (a shard's failover). */
  #clusterRefreshed(cluster: Cluster): void {
    const ranges = shardRanges(cluster);
    if (ranges.length === 0) return;
    const previous = this.#ranges;
    this.#ranges = ranges;
    this.#masters = [...new Set(ranges.map((range) => range.master))].sort();
    if (previous.length === 0) return;
    const changes = new Map<string, { from: string | undefined; to: string; slots: string[] }>();
    for (const range of ranges) {
      const from = masterAt(previous, range.start);
      if (from === range.master) continue;
      const id = `${from ?? ''}>${range.master}`;
      const change = changes.get(id) ?? { from, to: range.master, slots: [] };
      change.slots.push(range.start === range.end ? String(range.start) : `${range.start}-${range.end}`);
      changes.set(id, change);
    }
    for (const change of changes.values()) {
      this.#masterChanges += 1;
      this.#emit({ kind: 'master-changed', from: change.from, to: change.to, slots: change.slots.join(',') });
    }
    this.#suspect();
  }

  /**
   * Every master's INFO memory and replication, within the command deadline (Cluster: every
   * shard's). INFO is answered under OOM, where PING would say nothing of the refused writes,
   * and by managed services that refuse CONFIG; ioredis sends it at once, never behind an
   * automatic pipeline that waits for a paused server.
   */
  async #probe(): Promise<ServerState[]> {
    const client = this.#redis;
    if (!(client instanceof Cluster)) {
      const address = this.#masters[0] ?? `${client.options.host ?? '127.0.0.1'}:${client.options.port ?? 6379}`;
      return [parseServerInfo(address, await client.info(...INFO_SECTIONS))];
    }
    const masters = [...new Set(shardRanges(client).map((range) => range.master))];
    if (masters.length === 0) throw new Error('no cluster slot map yet');
    const nodes = new Map(client.nodes('all').map((node) => [`${node.options.host ?? ''}:${node.options.port ?? 0}`, node]));
    const missing = masters.filter((master) => !nodes.has(master));
    if (missing.length > 0) {
      // A dead master's connection is gone; a fresh slot map names its successor once promoted.
      client.refreshSlotsCache();
      throw new Error(`no connection to master ${missing.join(', ')}`);
    }
    return Promise.all(masters.map(async (master) => parseServerInfo(master, await nodes.get(master)!.info(...INFO_SECTIONS))));
  }

  /**
   * One health check at a time; its result is the store's state (D54, D55), and what it found
   * (readiness answers by it). A check that finds the connection closed and being made again,
   * with no failed attempt yet, leaves the state as it was: the attempt names the cause (refused,
   * WRONGPASS, ...), or the connection is ready again and the next check judges the server.
   */
  #check(): Promise<StoreFailure | undefined> {
    this.#checking ??= (async () => {
      this.#lastCheckAt = performance.now();
      let failure: StoreFailure | undefined;
      try {
        const servers = await withDeadline(this.#probe(), this.#commandTimeoutMs, storeLate);
        failure = judgeServers(servers, { refuseEvicting: this.#refuseEvicting, refusedWrites: this.#refusedWrites });
        if (failure?.reason !== 'out_of_memory') this.#refusedWrites = false;
        this.#memoryUsedRatio = memoryUsedRatio(servers);
        const policy = evictingPolicies(servers);
        if (policy !== this.#evictingPolicy) {
          this.#evictingPolicy = policy;
          // Refused (production), the policy is the store's failure, reported as such.
          if (!this.#refuseEvicting) this.#emit({ kind: 'evicting-policy', policy });
        }
      } catch (error) {
        failure = nameFailure(error, this.#connectionError);
        // Down already, the known reason stands (a read-only master drops every connection a write met).
        if (failure.detail === NOT_CONNECTED && this.#redis.status !== 'end') return this.#up === false ? this.#failure : failure;
      }
      this.#setState(failure);
      return failure;
    })().finally(() => {
      this.#checking = undefined;
      if (this.#recheck && !this.#closed) {
        this.#recheck = false;
        void this.#check();
      }
    });
    return this.#checking;
  }

  /**
   * One event per change: down (with the reason) and up. Unreachable and timed out are one
   * state for the log (a dying connection goes through both); any other new reason is a change.
   */
  #setState(failure: StoreFailure | undefined): void {
    const up = failure === undefined;
    const previous = this.#up === false ? this.#failure.reason : undefined;
    if (failure) this.#failure = failure;
    if (this.#up === up && (up || connectivity(previous) === connectivity(failure?.reason))) return;
    this.#up = up;
    this.#emit(failure ? { kind: 'down', ...failure } : { kind: 'up' });
    if (up) void this.#runRepairs();
  }

  /** A request failed or a connection dropped: check now rather than at the next tick. */
  #suspect(): void {
    if (this.#closed || this.#checking || performance.now() - this.#lastCheckAt < SUSPECT_DEBOUNCE_MS) return;
    void this.#check();
  }

  /**
   * The store answers again (a reconnection, a command that succeeded while down): check now,
   * without the debounce, and once more after a check already running (it may have started
   * before the connection was back). Recovery is seen at once, not at the next tick.
   */
  #checkSoon(): void {
    if (this.#closed) return;
    if (this.#checking) this.#recheck = true;
    else void this.#check();
  }

  /**
   * A store operation failed: named (D55), counted, a check prompted, and the error to throw
   * (503). A write refused for memory makes the store out of memory at once (D54): Redis knows
   * better than INFO read at rest, which often shows a full server just under its limit.
   */
  #failed(error: unknown): StoreUnavailableError {
    const failure = nameFailure(error, this.#connectionError);
    this.#failedOperations[failure.reason] += 1;
    if (failure.reason === 'out_of_memory' && !this.#refusedWrites) {
      this.#refusedWrites = true;
      this.#checkSoon();
    } else {
      this.#suspect();
    }
    return new StoreUnavailableError(error, failure);
  }

  /**
   * A store operation succeeded. A write Redis accepted means it has memory for writes again;
   * while the store counts as down, any answer is worth a check now.
   */
  #succeeded(wrote: boolean): void {
    if (wrote) this.#refusedWrites = false;
    if (this.#up === false && this.#failure.reason !== 'evicting_policy') this.#checkSoon();
  }

  #schedule(ms: number): void {
    if (this.#closed) return;
    clearTimeout(this.#monitor);
    this.#monitor = setTimeout(() => void this.#tick(), ms);
    // The monitor never keeps a process alive on its own.
    this.#monitor.unref();
  }

  async #tick(): Promise<void> {
    await this.#check();
    if (this.#topology === 'sentinel' && this.#up === true) await this.#followSentinels();
    await this.#runRepairs();
    this.#schedule(this.#up === true && this.#repairs.size === 0 ? this.#monitorIntervalMs : this.#fastMonitorIntervalMs);
  }

  /**
   * Sentinel: a master that is demoted while alive (SENTINEL FAILOVER, a partition) keeps
   * accepting writes on the open connection until the sentinels reconfigure it, several seconds
   * after the promotion, and those writes are then lost. Every tick, one sentinel is asked which
   * server is the master; when it names another one, the connection is dropped and made again
   * through the sentinels. (ioredis's own failoverDetector waits for `+switch-master`, a second
   * after the promotion, and drops the connection even when it already reached the new master.)
   */
  async #followSentinels(): Promise<void> {
    const client = this.#redis;
    if (client instanceof Cluster) return;
    const { sentinels, name, sentinelUsername, sentinelPassword, sentinelTLS, enableTLSForSentinelMode } = client.options;
    if (!sentinels || sentinels.length === 0 || !name || client.status !== 'ready') return;
    if (!this.#sentinel) {
      const address = sentinels[this.#sentinelIndex % sentinels.length]!;
      this.#sentinel = new Redis({
        host: address.host ?? '127.0.0.1',
        port: address.port ?? 26379,
        ...(sentinelUsername && { username: sentinelUsername }),
        ...(sentinelPassword && { password: sentinelPassword }),
        ...(enableTLSForSentinelMode && sentinelTLS && { tls: sentinelTLS }),
        enableReadyCheck: false,
        enableOfflineQueue: true,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
        connectTimeout: this.#commandTimeoutMs * 3,
        lazyConnect: true,
      });
      this.#sentinel.on('error', () => undefined);
    }
    try {
      const named = (await withDeadline(this.#sentinel.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name), this.#commandTimeoutMs, storeLate)) as
        [string, string] | null;
      const stream = client.stream;
      if (!named || stream.remotePort === undefined || stream.remoteAddress === undefined) return;
      const [host, port] = named;
      if (Number(port) !== stream.remotePort) return this.#reconnectToMaster();
      const current = stream.remoteAddress.replace(/^::ffff:/, '');
      const addresses = isIP(host) ? [host] : (await lookup(host, { all: true })).map((entry) => entry.address);
      if (!addresses.includes(current)) this.#reconnectToMaster();
    } catch {
      // This sentinel is away: the next tick asks the next one.
      this.#sentinel.disconnect();
      this.#sentinel = undefined;
      this.#sentinelIndex += 1;
    }
  }

  #reconnectToMaster(): void {
    const client = this.#redis;
    if (!(client instanceof Cluster) && client.status === 'ready') client.disconnect(true);
  }

  // ---------------------------------------------------------------- repairs of unknown outcomes

  #addRepair(owner: string, repair: Repair): void {
    const id = `${repair.key}\u0000${owner}`;
    this.#repairs.delete(id);
    if (this.#repairs.size >= MAX_REPAIRS) {
      const oldest = this.#repairs.keys().next();
      if (!oldest.done) this.#repairs.delete(oldest.value);
    }
    this.#repairs.set(id, repair);
    // The monitor runs repairs every FAST_MONITOR_INTERVAL_MS while any are pending; one timer
    // makes the first one prompt without a timer per repair in an outage.
    if (this.#repairTimer === undefined) {
      this.#repairTimer = setTimeout(
        () => {
          this.#repairTimer = undefined;
          void this.#runRepairs();
        },
        Math.max(0, repair.notBefore - Date.now()) + 5,
      );
      this.#repairTimer.unref();
    }
  }

  /**
   * Settles every due repair. Each is owner-guarded in its script: a release frees only the
   * claim it was made for, a completion never overwrites another owner's live claim or a record.
   */
  async #runRepairs(): Promise<void> {
    if (this.#repairing || this.#repairs.size === 0 || this.#closed) return;
    this.#repairing = true;
    try {
      const now = Date.now();
      const due: [string, Repair][] = [];
      for (const [id, repair] of this.#repairs) {
        if (repair.giveUpAt <= now) this.#repairs.delete(id);
        else if (repair.notBefore <= now) due.push([id, repair]);
      }
      for (let i = 0; i < due.length; i += 64) {
        let failed = false;
        await Promise.all(
          due.slice(i, i + 64).map(async ([id, repair]) => {
            try {
              await withDeadline(
                this.#redis[repair.kind === 'release' ? 'releaseIdempotency' : 'completeIdempotency'](repair.key, ...repair.args),
                this.#commandTimeoutMs,
                storeLate,
              );
              if (this.#repairs.get(id) === repair) this.#repairs.delete(id);
            } catch {
              failed = true;
            }
          }),
        );
        if (failed) {
          this.#suspect();
          return;
        }
      }
    } finally {
      this.#repairing = false;
    }
  }

  // ---------------------------------------------------------------- store operations

  /**
   * Runs store work against the command deadline (D23): late or failed work is a
   * StoreUnavailableError. The deadline waits one turn of the loop after its timer, so a reply
   * that arrived while this process was busy is still taken (deadline.ts). `writes`: the work
   * sends a command Redis refuses when out of memory (not a read, not a DEL).
   */
  #guarded<T>(writes: boolean, work: () => Promise<T>): Promise<T> {
    return withDeadline(work(), this.#commandTimeoutMs, storeLate).then(
      (result) => {
        this.#succeeded(writes);
        return result;
      },
      (error: unknown) => {
        throw this.#failed(error);
      },
    );
  }

  /** Wall-clock time, not the injected clock: it is compared with Redis's TIME, not with records. */
  #deadline(): number {
    return Date.now() + this.#deadlineMs;
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
      createFamily: ({ token, credentialId, fingerprint, expiresAt, endsAt, now }) =>
        this.#guarded(true, async () => {
          const ttl = ttlFor(expiresAt, now);
          // Both keys share the family's hash tag: one slot, so MULTI works on a Cluster too.
          await redis
            .multi()
            .hset(this.#familyKey(token.familyId), 'cred', credentialId, 'revoked', '0', 'fp', fingerprint, 'login', String(now), 'end', String(endsAt))
            .pexpire(this.#familyKey(token.familyId), ttl)
            .hset(this.#tokenKey(token), 'exp', String(expiresAt))
            .pexpire(this.#tokenKey(token), ttl)
            .exec();
        }),
      rotate: ({ token, credentialId, newTokenHash, newExpiresAt, now, graceMs, fingerprint, notBefore }) =>
        this.#guarded(true, async (): Promise<RotateResult> => {
          const [outcome, expiresAt] = notStale<[Exclude<RotateResult['outcome'], 'rotated'> | 'rotated', string?]>(
            await redis.rotateRefresh(
              this.#familyKey(token.familyId),
              this.#tokenKey(token),
              this.#tokenKey({ familyId: token.familyId, tokenHash: newTokenHash }),
              credentialId,
              String(now),
              String(graceMs),
              String(newExpiresAt),
              String(ttlFor(newExpiresAt, now)),
              fingerprint,
              String(notBefore),
              String(this.#deadline()),
            ),
          );
          return outcome === 'rotated' ? { outcome, expiresAt: Number(expiresAt) } : { outcome };
        }),
      revokeFamily: ({ token, credentialId, now, graceMs, fingerprint, notBefore }) =>
        this.#guarded(true, async () =>
          notStale<RevokeOutcome>(
            await redis.revokeFamily(
              this.#familyKey(token.familyId),
              this.#tokenKey(token),
              credentialId,
              String(now),
              String(graceMs),
              fingerprint,
              String(notBefore),
              String(this.#deadline()),
            ),
          ),
        ),
    };
  }

  #idempotency(): IdempotencyStore {
    const redis = this.#redis;
    const key = (name: string) => `${this.#prefix}idem:{${name}}`;
    return {
      reserve: async (name, { owner, now, leaseMs, attempt }) => {
        const deadline = this.#deadline();
        try {
          const answer = notStale<string[]>(
            await withDeadline(
              redis.reserveIdempotency(
                key(name),
                owner,
                String(now),
                String(now + leaseMs),
                String(leaseMs + 60_000),
                attempt.fingerprint,
                String(attempt.requestedCardLimit),
                attempt.credentialId,
                String(deadline),
              ),
              this.#commandTimeoutMs,
              storeLate,
            ),
          );
          this.#succeeded(true);
          return parseReservation(answer);
        } catch (error) {
          // The claim's outcome is unknown: it may have run with its reply lost (a master that
          // died, a connection that broke), or may still run (a paused Redis resuming, a command
          // re-sent after a reconnect) until its deadline. Either way the client gets 503 and
          // must be able to simply retry (D23), so the claim is released: at once, by a release
          // right behind it on the same connection (it runs after the claim if the claim runs
          // at all), and again once the claim's deadline has passed and the store answers (the
          // first release may have been refused on a broken connection, or overtaken by a
          // Cluster redirection). The release is owner-guarded: it frees only this claim.
          const releaseArgs = [owner, String(now + leaseMs), String(leaseMs + 60_000)];
          redis.releaseIdempotency(key(name), ...releaseArgs).catch(() => undefined);
          this.#addRepair(owner, { kind: 'release', key: key(name), args: releaseArgs, notBefore: deadline + 100, giveUpAt: Date.now() + leaseMs });
          throw this.#failed(error);
        }
      },
      peek: (name, now) =>
        this.#guarded(false, async () => {
          const [state, leaseExp, exp, record, ofp, oreq, ocred] = await redis.hmget(key(name), 'state', 'leaseExp', 'exp', 'record', 'ofp', 'oreq', 'ocred');
          if (state === 'completed' && Number(exp) > now && record) return { state: 'completed', record: JSON.parse(record) as StoredCard };
          if (state === 'pending' && Number(leaseExp) > now) return { state: 'pending', leaseExpiresAt: Number(leaseExp) };
          const previous =
            state === 'released' && Number(exp) > now && ofp ? { fingerprint: ofp, requestedCardLimit: Number(oreq), credentialId: ocred ?? '' } : undefined;
          return { state: 'reserved', previous };
        }),
      complete: async (name, { owner, record, expiresAt, now }) => {
        const args = [owner, JSON.stringify(record), String(expiresAt), String(ttlFor(expiresAt, now))];
        try {
          if (this.#replicasToAck === 0) {
            await withDeadline(redis.completeIdempotency(key(name), ...args), this.#commandTimeoutMs, storeLate);
          } else {
            await this.#completeAcknowledged(key(name), args);
          }
          this.#succeeded(true);
        } catch (error) {
          // The card exists and its client gets it; the record may or may not be stored. Store
          // it once the store answers, so that a retry is a replay and not a 409 or a second
          // forward (the script never overwrites a record or another owner's live claim).
          this.#addRepair(owner, {
            kind: 'complete',
            key: key(name),
            args,
            notBefore: Date.now(),
            // Repairs run on the process's own clock; the record's expiry is on the injected one.
            giveUpAt: Date.now() + Math.min(expiresAt - now, REPAIR_HORIZON_MS),
          });
          throw this.#failed(error);
        }
      },
      release: async (name, { owner, now, keepUntil }) => {
        const args = [owner, String(keepUntil), String(ttlFor(keepUntil, now))];
        try {
          await withDeadline(redis.releaseIdempotency(key(name), ...args), this.#commandTimeoutMs, storeLate);
          this.#succeeded(true);
        } catch (error) {
          // Sent on a dead connection, a release is lost, and the claim would hold the key until
          // its lease ends: the client's retry would wait or get 409. Release it once the store answers.
          this.#addRepair(owner, {
            kind: 'release',
            key: key(name),
            args,
            notBefore: Date.now(),
            giveUpAt: Date.now() + Math.min(keepUntil - now, REPAIR_HORIZON_MS),
          });
          throw this.#failed(error);
        }
      },
    };
  }

  /**
   * D35: the record, then WAIT on the same connection, so that it covers this write. In one
   * pipeline: on a Cluster a keyless WAIT sent alone goes to a random node, in a pipeline it
   * goes where the pipeline's keyed command goes. WAIT gives up after the command timeout; the
   * card is answered anyway (it exists at the connector, whose Idempotency-Key covers a lost
   * record), and the shortfall is reported once per change (replicas-behind).
   */
  async #completeAcknowledged(key: string, args: string[]): Promise<void> {
    const pipeline = (this.#redis.pipeline() as ScriptedPipeline).completeIdempotency(key, ...args);
    pipeline.call('WAIT', String(this.#replicasToAck), String(this.#commandTimeoutMs));
    const results = await withDeadline(pipeline.exec(), this.#commandTimeoutMs * 2, storeLate);
    const [written, waited] = results ?? [];
    if (!written || written[0]) throw written?.[0] ?? new Error('pipeline discarded');
    const acknowledged = waited && !waited[0] ? Number(waited[1]) : 0;
    if (acknowledged < this.#replicasToAck) {
      this.#unacknowledged += 1;
      if (!this.#replicasBehind) {
        this.#replicasBehind = true;
        this.#emit({ kind: 'replicas-behind', wanted: this.#replicasToAck, acknowledged });
      }
    } else if (this.#replicasBehind) {
      this.#replicasBehind = false;
      this.#emit({ kind: 'replicas-caught-up' });
    }
  }

  #lockouts(): LockoutStore {
    const redis = this.#redis;
    const key = (name: string) => `${this.#prefix}lock:{${name}}`;
    return {
      recordFailure: (name, { now, maxFailures, lockoutMs }) =>
        this.#guarded(true, async () =>
          Number(await redis.recordLoginFailure(key(name), String(now), String(maxFailures), String(now + lockoutMs), String(lockoutMs + 60_000))),
        ),
      lockedUntil: (name, now) =>
        this.#guarded(false, async () => {
          const until = Number((await redis.hget(key(name), 'lockedUntil')) ?? 0);
          return until > now ? until : 0;
        }),
      reset: (name) =>
        this.#guarded(false, async () => {
          await redis.del(key(name));
        }),
    };
  }

  /** D41: one hash of credential id -> not-before instant (no TTL: it must outlive every session). */
  #notBefore(): NotBeforeStore {
    const redis = this.#redis;
    const key = `${this.#prefix}cred-not-before`;
    return {
      raise: (credentialId, at) => this.#guarded(true, async () => Number(await redis.raiseNotBefore(key, credentialId, String(at)))),
      // HGETALL, a command no request sends: the periodic read is told apart from request work
      // (test/store/store-command-counts.test.ts). The hash holds one field per credential.
      read: (credentialIds) =>
        this.#guarded(false, async () => {
          const all = await redis.hgetall(key);
          const found = new Map<string, number>();
          for (const id of credentialIds) if (Object.hasOwn(all, id)) found.set(id, Number(all[id]));
          return found;
        }),
    };
  }

  /**
   * rate-limiter-flexible's RedisLimiter: one key per subject and window (no hash tag: each
   * counter is one key, any slot of a Cluster), one single-key script per consume. Its
   * `rejectIfRedisNotReady` looks at the client's status, which on a Cluster stays `ready`
   * while one shard fails over: there the command deadline gives the 503.
   */
  createRateLimiter({ keyPrefix, points, durationSeconds }: LimiterOptions): Limiter {
    const limiter = new RateLimiterRedis({
      storeClient: this.#redis,
      keyPrefix: `${this.#prefix}${keyPrefix}`,
      points,
      duration: durationSeconds,
      // Without this it waits for ioredis to reconnect instead of failing (rate-limiter-flexible #184).
      rejectIfRedisNotReady: true,
    });
    // The same command deadline as every other store call. Over the limit is an answer of the
    // store (its script ran and counted, so Redis took the write); any rejection is a failure,
    // named (D55).
    return { consume: (key) => this.#guarded(true, () => limiterResult(limiter.consume(key))) };
  }

  async ping(): Promise<void> {
    const failure = (await this.#check()) ?? (this.#up === true ? undefined : this.#failure);
    if (failure) throw new StoreUnavailableError(new Error(failure.detail), failure);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    // Claims and records still unsettled get one last chance (bounded by the command deadline).
    await this.#runRepairs();
    this.#closed = true;
    clearTimeout(this.#monitor);
    clearTimeout(this.#repairTimer);
    this.#listeners.clear();
    this.#sentinel?.disconnect();
    if (!this.#ownsClient) return;
    try {
      await withDeadline(this.#redis.quit(), this.#commandTimeoutMs * 3, storeLate);
    } catch {
      this.#redis.disconnect();
    }
  }
}

/** Unreachable and timed out are one state for the log: a connection that dies goes through both. */
function connectivity(reason: StoreFailureReason | undefined): string | undefined {
  return reason === 'timed_out' ? 'unreachable' : reason;
}

/** A guarded script that arrived after its deadline did nothing: for the caller, the store failed. */
function notStale<T>(answer: unknown): T {
  if (answer === 'stale') throw new Error('script arrived after its deadline; nothing was changed');
  return answer as T;
}

function parseReservation(answer: (string | null)[]): Reservation {
  const [state, value, ofp, oreq, ocred] = answer;
  if (state === 'completed' && value) return { state: 'completed', record: JSON.parse(value) as StoredCard };
  if (state === 'pending') return { state: 'pending', leaseExpiresAt: Number(value) };
  const previous = value === '1' && ofp ? { fingerprint: ofp, requestedCardLimit: Number(oreq), credentialId: ocred ?? '' } : undefined;
  return { state: 'reserved', previous };
}
