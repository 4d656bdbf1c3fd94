import { withDeadline } from '../../foundation/deadline.js';
import type { ClaimAttempt, IdempotencyStore, Reservation } from '../store-types.js';
import { completedValue, isWrongType, legacyReservation, ownerOf, parseReservation, pendingValue, reservationOf } from './idempotency-values.js';
import { ttlFor, type RecordContext } from './record-context.js';
import { REPAIR_HORIZON_MS, type RepairQueue } from './repair-queue.js';
import type { ReplicaAcks } from './replica-acks.js';
import { notStale, type ScriptedPipeline } from './scripts.js';
import { storeLate } from './server-state.js';

/**
 * Card-creation idempotency (D16, D17, D31): one string `idem:{account:requestId}` holding a claim
 * (pending, released) or the completed record (idempotency-values.ts). A write whose reply never came goes to `repairs`;
 * a completion waits for `acks.wanted` replicas when asked to (D35).
 */
export function redisIdempotency(context: RecordContext, repairs: RepairQueue, acks: ReplicaAcks): IdempotencyStore {
  const { redis, prefix, commandTimeoutMs } = context;
  const key = (name: string) => `${prefix}idem:{${name}}`;
  // Owner-guarded scripts: a release frees only its own claim, a completion never overwrites a
  // record or another owner's live claim, so repeating one that did run changes nothing.
  const repairOf = (owner: string, name: string, settle: () => Promise<unknown>, times: { notBefore: number; giveUpAt: number }) =>
    repairs.add(`${key(name)}\u0000${owner}`, { settle, ...times });

  /**
   * A write whose reply may never come: on failure the client gets its 503 and the write is sent
   * again (`resend`) once the store answers, for as long as it matters (`validMs`, at most the
   * repair horizon; on the process's own clock, as the record's expiry is on the injected one).
   */
  async function writeOrRepair(owner: string, name: string, write: () => Promise<unknown>, resend: () => Promise<unknown>, validMs: number): Promise<void> {
    try {
      await write();
      context.succeeded(true);
    } catch (error) {
      repairOf(owner, name, resend, { notBefore: Date.now(), giveUpAt: Date.now() + Math.min(validMs, REPAIR_HORIZON_MS) });
      throw context.failed(error);
    }
  }

  /**
   * D35: the record, then WAIT on the same connection, so that it covers this write. In one
   * pipeline: on a Cluster a keyless WAIT sent alone goes to a random node, in a pipeline it
   * goes where the pipeline's keyed command goes. WAIT gives up after the command timeout; the
   * card is answered anyway (it exists at the connector, whose Idempotency-Key covers a lost
   * record), and the shortfall is reported once per change (replicas-behind).
   */
  async function completeAcknowledged(recordKey: string, args: string[]): Promise<void> {
    const pipeline = (redis.pipeline() as ScriptedPipeline).completeIdempotency(recordKey, ...args);
    pipeline.call('WAIT', String(acks.wanted), String(commandTimeoutMs));
    const results = await withDeadline(pipeline.exec(), commandTimeoutMs * 2, storeLate);
    const [written, waited] = results ?? [];
    if (!written || written[0]) throw written?.[0] ?? new Error('pipeline discarded');
    acks.note(waited && !waited[0] ? Number(waited[1]) : 0);
  }

  /**
   * The claim in one round trip of two plain commands: `SET NX GET` takes a free key (its
   * answer nil) or tells what holds it, and `PEXPIRE GT` gives a new claim its lifetime. The
   * SET's own expiry is the claim's deadline (PXAT, by Redis's clock): a claim that reaches
   * Redis past it (a paused server resuming, a re-sent command) leaves nothing behind, which
   * is what the other scripts' STALE_GUARD does at the cost of a TIME. A claim the PEXPIRE did
   * not find (nil answer, 0) expired at once: Redis's clock is past the deadline, and the
   * claim counts as failed. Only a key that holds something the claim may take over (a
   * released attempt, a lapsed claim, an expired record) or a hash of an earlier version goes
   * on to the reserve script.
   */
  async function claim(name: string, owner: string, now: number, leaseMs: number, attempt: ClaimAttempt, deadline: number): Promise<Reservation> {
    const k = key(name);
    const set = redis.call('SET', k, pendingValue(owner, now + leaseMs, attempt), 'NX', 'PXAT', String(deadline), 'GET') as Promise<string | null>;
    const extend = redis.pexpire(k, leaseMs + 60_000, 'GT');
    const [seen, extended] = await withDeadline(
      Promise.all([set.catch((error: unknown) => (isWrongType(error) ? LEGACY : Promise.reject(error))), extend]),
      commandTimeoutMs,
      storeLate,
    );
    if (seen === null) {
      if (extended !== 1) throw new Error('claim reached the store after its deadline; nothing was claimed');
      return { state: 'reserved', previous: undefined };
    }
    if (seen !== LEGACY && ownerOf(seen) !== owner) {
      const found = reservationOf(seen, now);
      if (found.state !== 'reserved') return found;
    }
    const answer = await withDeadline(
      redis.reserveIdempotency(
        k,
        owner,
        String(now),
        String(now + leaseMs),
        String(leaseMs + 60_000),
        attempt.fingerprint,
        String(attempt.requestedCardLimit),
        attempt.credentialId,
        String(deadline),
      ),
      commandTimeoutMs,
      storeLate,
    );
    return parseReservation(notStale<string[]>(answer));
  }

  return {
    reserve: async (name, { owner, now, leaseMs, attempt }) => {
      const deadline = context.deadline();
      try {
        const reservation = await claim(name, owner, now, leaseMs, attempt, deadline);
        context.succeeded(true);
        return reservation;
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
        repairOf(owner, name, () => redis.releaseIdempotency(key(name), ...releaseArgs), { notBefore: deadline + 100, giveUpAt: Date.now() + leaseMs });
        throw context.failed(error);
      }
    },
    peek: (name, now) =>
      context.guarded(false, async () => {
        try {
          return reservationOf(await redis.get(key(name)), now);
        } catch (error) {
          if (!isWrongType(error)) throw error;
          return legacyReservation(await redis.hmget(key(name), 'state', 'leaseExp', 'exp', 'record', 'ofp', 'oreq', 'ocred'), now);
        }
      }),
    complete: async (name, { owner, record, expiresAt, now }) => {
      const args = [owner, completedValue(record, expiresAt), String(ttlFor(expiresAt, now)), String(now)];
      const completion = () => redis.completeIdempotency(key(name), ...args);
      // The card exists and its client gets it; the record may or may not be stored. Store
      // it once the store answers, so that a retry is a replay and not a 409 or a second
      // forward (the script never overwrites a record or another owner's live claim).
      const write = () => (acks.wanted === 0 ? withDeadline(completion(), commandTimeoutMs, storeLate) : completeAcknowledged(key(name), args));
      return writeOrRepair(owner, name, write, completion, expiresAt - now);
    },
    release: async (name, { owner, now, keepUntil }) => {
      const args = [owner, String(keepUntil), String(ttlFor(keepUntil, now))];
      const release = () => redis.releaseIdempotency(key(name), ...args);
      // Sent on a dead connection, a release is lost, and the claim would hold the key until
      // its lease ends: the client's retry would wait or get 409. Release it once the store answers.
      return writeOrRepair(owner, name, () => withDeadline(release(), commandTimeoutMs, storeLate), release, keepUntil - now);
    },
  };
}

/** A claim's SET met a hash written by an earlier version: the reserve script reads it. */
const LEGACY = Symbol('legacy');
