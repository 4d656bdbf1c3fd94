import type { StoreFailure } from '../store-types.js';

/**
 * What a Redis server's answers say about its ability to serve the gateway (D54, D55): its
 * `INFO memory replication`, judged, and a failed command or connection, named.
 */

/** One server as its `INFO memory replication` describes it. */
export interface ServerState {
  /** `host:port` as the gateway reaches it. */
  readonly address: string;
  readonly policy: string;
  /** `used_memory` less `mem_not_counted_for_evict`: what Redis compares with `maxmemory`. */
  readonly usedMemory: number;
  /** 0: no limit. */
  readonly maxMemory: number;
  /** `master` or `slave`. */
  readonly role: string;
}

/** Parses the `field:value` lines of INFO; a field it lacks is an error (not a Redis, or an old one). */
export function parseServerInfo(address: string, info: string): ServerState {
  const fields = new Map<string, string>();
  for (const line of info.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon > 0 && !line.startsWith('#')) fields.set(line.slice(0, colon), line.slice(colon + 1).trim());
  }
  const field = (name: string): string => {
    const value = fields.get(name);
    if (value === undefined) throw new Error(`INFO of ${address} has no ${name}`);
    return value;
  };
  return {
    address,
    policy: field('maxmemory_policy'),
    usedMemory: Number(field('used_memory')) - Number(fields.get('mem_not_counted_for_evict') ?? 0),
    maxMemory: Number(field('maxmemory')),
    role: field('role'),
  };
}

/** Every policy but `noeviction` drops keys; `volatile-*` too, since every gateway key has a TTL (D54). */
const evicts = (state: ServerState): boolean => state.policy !== 'noeviction';

/**
 * After Redis refused a write with OOM, how far under `maxmemory` a server must be to count as
 * having room again. Redis checks memory with the command's own arguments and every client's
 * buffers counted, so a server that refuses writes often reads just under its limit at rest;
 * the margin also keeps the state from flapping at the edge.
 */
export const roomMargin = (maxMemory: number): number => Math.min(256 * 1024, Math.floor(maxMemory / 20));

/**
 * Redis refuses commands that may grow memory past `maxmemory` (evict.c's getMaxmemoryState);
 * once it has refused one, the server counts as full until it has its margin back.
 */
const outOfMemory = (state: ServerState, refusedWrites: boolean): boolean =>
  state.maxMemory > 0 && state.usedMemory > state.maxMemory - (refusedWrites ? roomMargin(state.maxMemory) : 0);

/** `allkeys-lru on 127.0.0.1:6379, volatile-ttl on ...`, or undefined when every server runs noeviction. */
export function evictingPolicies(states: readonly ServerState[]): string | undefined {
  const evicting = states.filter(evicts);
  return evicting.length === 0 ? undefined : evicting.map((state) => `${state.policy} on ${state.address}`).join(', ');
}

/** The fullest server's used memory as a share of its limit; undefined when none has a limit. */
export function memoryUsedRatio(states: readonly ServerState[]): number | undefined {
  const limited = states.filter((state) => state.maxMemory > 0);
  return limited.length === 0 ? undefined : Math.max(...limited.map((state) => state.usedMemory / state.maxMemory));
}

/**
 * Whether the servers, all answering, can serve the gateway: a replica cannot take writes, a
 * server out of memory refuses them (`refusedWrites`: Redis refused one of the gateway's since
 * memory last had room), and an evicting policy is a failure only when `refuseEvicting`
 * (production, D54).
 */
export function judgeServers(states: readonly ServerState[], options: { refuseEvicting: boolean; refusedWrites: boolean }): StoreFailure | undefined {
  const replica = states.find((state) => state.role !== 'master');
  if (replica) return { reason: 'read_only', detail: `${replica.address} is a replica (role ${replica.role}), not a master` };
  const full = states.find((state) => outOfMemory(state, options.refusedWrites));
  if (full)
    return {
      reason: 'out_of_memory',
      detail: `used memory ${full.usedMemory} of maxmemory ${full.maxMemory} bytes on ${full.address}; writes are refused (OOM)`,
    };
  const { refuseEvicting } = options;
  const policies = evictingPolicies(states);
  if (refuseEvicting && policies) return { reason: 'evicting_policy', detail: `maxmemory-policy is ${policies}; production needs noeviction (D54)` };
  return undefined;
}

/** ioredis's (and rate-limiter-flexible's) words for "not connected", which hide why (the connection's own error says it). */
const NOT_CONNECTED_TEXTS = [
  "Stream isn't writeable",
  'Redis connection is not ready',
  'Connection is closed',
  "Cluster isn't ready",
  'None of startup nodes is available',
  'Reached the max retries per request limit',
];

/** The detail of a failure that is only "not connected, no attempt failed yet": why is not known. */
export const NOT_CONNECTED = 'not connected; reconnecting';

/** Redis's words for a password it refused (AUTH), as opposed to NOAUTH: none given yet. */
const PASSWORD_REFUSED = /^WRONGPASS\b|^ERR invalid (username-)?password/;

const TIMED_OUT = ['store command timed out', 'Command timed out', 'script arrived after its deadline'];

/** What the gateway's own command deadline rejects with (deadline.ts): named `timed_out`. */
export const storeLate = (): Error => new Error('store command timed out');

/**
 * The reply or error that says what happened: the cause of a StoreUnavailableError, the first
 * refused command of a transaction (EXECABORT), the last node error of a Cluster redirection.
 */
function underlying(error: unknown): Error | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current instanceof Error; depth += 1) {
    const carrier = current as Error & { previousErrors?: unknown[]; lastNodeError?: unknown };
    if (current.name === 'StoreUnavailableError' && current.cause instanceof Error) current = current.cause;
    else if (current.message.startsWith('EXECABORT') && carrier.previousErrors?.[0] instanceof Error) current = carrier.previousErrors[0];
    else if (carrier.lastNodeError instanceof Error) current = carrier.lastNodeError;
    else return current;
  }
  return current instanceof Error ? current : undefined;
}

/**
 * Names a failed store command or connection (D55). `connectionError` is the client's last
 * connection error: with the offline queue off, a command on a broken connection fails with
 * "Stream isn't writeable", which says nothing of the NOAUTH, WRONGPASS or ECONNREFUSED behind it.
 */
export function nameFailure(error: unknown, connectionError?: Error): StoreFailure {
  const found = underlying(error);
  const detail = found?.message || 'no answer';
  if (/^OOM\b/.test(detail)) return { reason: 'out_of_memory', detail };
  if (/^READONLY\b/.test(detail)) return { reason: 'read_only', detail };
  if (PASSWORD_REFUSED.test(detail)) return { reason: 'authentication_refused', detail };
  if (/^NOAUTH\b/.test(detail)) {
    // A connection whose AUTH was refused answers its next commands NOAUTH; the refused AUTH is
    // the cause, in the words an operator needs (a wrong password, not a missing one).
    const refusedAuth = connectionError && PASSWORD_REFUSED.test(connectionError.message);
    return { reason: 'authentication_refused', detail: refusedAuth ? connectionError.message : detail };
  }
  if (TIMED_OUT.some((text) => detail.startsWith(text))) return { reason: 'timed_out', detail };
  if (NOT_CONNECTED_TEXTS.some((text) => detail.startsWith(text))) {
    if (connectionError && connectionError !== found) return nameFailure(connectionError);
    return { reason: 'unreachable', detail: NOT_CONNECTED };
  }
  return { reason: 'unreachable', detail };
}
