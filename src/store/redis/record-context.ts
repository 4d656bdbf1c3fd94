import { withDeadline } from '../../foundation/deadline.js';
import type { StoreUnavailableError } from '../store-types.js';
import type { ScriptedClient } from './scripts.js';
import { storeLate } from './server-state.js';

/** Cleanup TTL: the record's own expiry plus a minute of slack. */
export const ttlFor = (expiresAt: number, now: number): number => Math.max(1000, expiresAt - now + 60_000);

/** What the health monitor learns from each store operation (health-monitor.ts). */
export interface OperationOutcomes {
  /** Names and counts a failure (D55), prompts a check, and returns the error to throw (503). */
  failed(error: unknown): StoreUnavailableError;
  /** `wrote`: Redis accepted a command it refuses when out of memory. */
  succeeded(wrote: boolean): void;
}

/** What every record kind's module works with: one per store. */
export interface RecordContext extends OperationOutcomes {
  readonly redis: ScriptedClient;
  /** Namespaces one environment's keys (D8), e.g. `gw:sandbox:`. */
  readonly prefix: string;
  readonly commandTimeoutMs: number;
  /**
   * Runs store work against the command deadline (D23): late or failed work is a
   * StoreUnavailableError. The deadline waits one turn of the loop after its timer, so a reply
   * that arrived while this process was busy is still taken (deadline.ts). `writes`: the work
   * sends a command Redis refuses when out of memory (not a read, not a DEL).
   */
  guarded<T>(writes: boolean, work: () => Promise<T>): Promise<T>;
  /** A guarded script's deadline: wall-clock time, compared with Redis's TIME, not with records. */
  deadline(): number;
}

export function recordContext(
  redis: ScriptedClient,
  prefix: string,
  options: { commandTimeoutMs: number; deadlineMs: number },
  outcomes: OperationOutcomes,
): RecordContext {
  const { commandTimeoutMs, deadlineMs } = options;
  return {
    redis,
    prefix,
    commandTimeoutMs,
    failed: (error) => outcomes.failed(error),
    succeeded: (wrote) => outcomes.succeeded(wrote),
    guarded: (writes, work) =>
      withDeadline(work(), commandTimeoutMs, storeLate).then(
        (result) => {
          outcomes.succeeded(writes);
          return result;
        },
        (error: unknown) => {
          throw outcomes.failed(error);
        },
      ),
    deadline: () => Date.now() + deadlineMs,
  };
}
