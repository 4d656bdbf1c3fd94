import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { pino } from 'pino';
import type { Clock } from '../clock.js';

export type AuditEventName =
  | 'login.succeeded'
  | 'login.failed'
  | 'login.rate_limited'
  | 'login.locked_out'
  | 'refresh.succeeded'
  | 'refresh.failed'
  | 'refresh.rate_limited'
  | 'refresh.reuse_detected'
  | 'logout'
  | 'access.denied'
  | 'card.created'
  | 'card.replayed'
  | 'card.revealed';

/**
 * One audit event (D21). The fields are a closed list of identifiers: there is no place to
 * put a token, password, PAN or CVC, so none can leak through a careless call.
 */
export interface AuditEvent {
  event: AuditEventName;
  correlationId: string;
  clientAddress: string;
  outcome: 'success' | 'failure' | 'denied';
  credential?: string | undefined;
  /** Why it was denied or failed, from a fixed vocabulary (`inactive`, `address`, `permission`, ...). */
  reason?: string | undefined;
  requestId?: string | undefined;
  cardId?: string | undefined;
}

export interface AuditSink {
  record(event: AuditEvent): void;
  close(): Promise<void>;
}

function line(clock: Clock, event: AuditEvent): string {
  const { event: name, correlationId, clientAddress, outcome, credential, reason, requestId, cardId } = event;
  return `${JSON.stringify({ time: new Date(clock.now()).toISOString(), event: name, correlationId, credential, clientAddress, outcome, reason, requestId, cardId })}\n`;
}

/**
 * Appends JSON lines to the audit file through sonic-boom (pino's file writer): writes do not
 * block the request, lines are never interleaved, and with `fsync` every write is flushed to
 * disk before the next. `close()` flushes what is pending (SIGTERM path).
 */
export function createFileAuditSink(file: string, clock: Clock, options: { fsync: boolean }): AuditSink {
  mkdirSync(dirname(file), { recursive: true });
  const destination = pino.destination({ dest: file, append: true, sync: false, mkdir: true, fsync: options.fsync });
  return {
    record: (event) => {
      destination.write(line(clock, event));
    },
    close: () =>
      new Promise((resolve) => {
        try {
          destination.flushSync();
        } catch {
          // Not yet open or already closed: nothing pending to flush.
        }
        destination.end();
        resolve();
      }),
  };
}

/** Keeps lines in memory; tests read `lines` to prove what was (and was not) audited. */
export class MemoryAuditSink implements AuditSink {
  readonly lines: string[] = [];
  constructor(private readonly clock: Clock) {}

  record(event: AuditEvent): void {
    this.lines.push(line(this.clock, event));
  }

  events(): (AuditEvent & { time: string })[] {
    return this.lines.map((text) => JSON.parse(text) as AuditEvent & { time: string });
  }

  async close(): Promise<void> {}
}
