import { close, fchmodSync, fstatSync, fsync, mkdirSync, open, openSync, write } from 'node:fs';
import { dirname } from 'node:path';

/** The state an appender reports to its owner: writable again, or failing with an error code. */
export type AppenderState = { writable: true } | { writable: false; code: string };

export interface AppenderOptions {
  /** fsync after every write (the audit trail's `fsync: true`). */
  fsync: boolean;
  /** While failing, how often to try again. */
  retryMs?: number;
  /** Lines kept in memory while the file cannot be written; the oldest beyond this are dropped. */
  maxPendingBytes?: number;
  /** File mode on creation; an existing file loses group-write and every bit for others. */
  mode?: number;
  /**
   * After a write, how long lines gather before the next one. The first line after a quiet spell
   * is written at once; under load each write carries every line of this span, not one line:
   * each write costs the event loop a hand-over to libuv's pool (about 20 µs here, issue 34),
   * and with `fsync` a flush of the disk.
   */
  gatherMs?: number;
  onState?: (state: AppenderState) => void;
  /** Called with the number of lines dropped because the pending buffer was full. */
  onDropped?: (lines: number) => void;
}

/**
 * Appends lines to a file without ever blocking the event loop: writes go through libuv's
 * thread pool one batch at a time (lines recorded in the same turn of the loop share a write,
 * and under load so do the lines of `gatherMs` after the last write), in order. When a write fails (disk full, I/O error) the batch is kept, the appender reports
 * itself not writable, and it retries on a timer until the disk takes the lines again; then it
 * reports writable. Nothing here loops synchronously, so a broken disk can neither freeze the
 * process nor hold up its exit (the failure mode of a synchronous flush at exit).
 */
export class FileAppender {
  readonly #path: string;
  readonly #options: Required<Omit<AppenderOptions, 'onState' | 'onDropped'>> & Pick<AppenderOptions, 'onState' | 'onDropped'>;
  #fd: number;
  #pending: string[] = [];
  #pendingBytes = 0;
  /** The batch being written (kept until the disk accepted all of it). */
  #inflight: Buffer | undefined;
  #writing = false;
  #scheduled = false;
  #gathering: NodeJS.Timeout | undefined;
  #retry: NodeJS.Timeout | undefined;
  #failure: string | undefined;
  #reopening: Promise<void> | undefined;
  #closed = false;
  #idle: (() => void)[] = [];

  constructor(path: string, options: AppenderOptions) {
    this.#path = path;
    this.#options = { retryMs: 1000, maxPendingBytes: 16 * 1024 * 1024, mode: 0o640, gatherMs: 2, ...options };
    mkdirSync(dirname(path), { recursive: true });
    this.#fd = this.#openSync();
  }

  get writable(): boolean {
    return this.#failure === undefined;
  }

  /** Queues one line (with its newline); never throws, never blocks. */
  append(line: string): void {
    if (this.#closed) return;
    this.#pending.push(line);
    this.#pendingBytes += line.length;
    while (this.#pendingBytes > this.#options.maxPendingBytes && this.#pending.length > 1) {
      this.#pendingBytes -= this.#pending.shift()!.length;
      this.#options.onDropped?.(1);
    }
    this.#schedule();
  }

  /** Opens the path again (log rotation, D22): lines after this go to the file now at the path. */
  reopen(): Promise<void> {
    this.#reopening ??= (async () => {
      await this.#whenIdle();
      try {
        const fd = await new Promise<number>((resolve, reject) =>
          open(this.#path, 'a', this.#options.mode, (error, opened) => (error ? reject(error) : resolve(opened))),
        );
        this.#restrictMode(fd);
        const old = this.#fd;
        this.#fd = fd;
        close(old, () => undefined);
      } catch (error) {
        this.#fail(error);
      } finally {
        this.#reopening = undefined;
      }
      this.#schedule();
    })();
    return this.#reopening;
  }

  /** Writes what is pending (waiting at most `timeoutMs`), then closes the file. */
  async close(timeoutMs = 2000): Promise<void> {
    if (this.#closed) return;
    if (this.#gathering) this.#writeGathered();
    else this.#schedule();
    const flushed = new Promise<void>((resolve) => {
      const check = () => {
        if (this.#pending.length === 0 && !this.#inflight) resolve();
        else this.#idle.push(check);
      };
      check();
    });
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([flushed, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs).unref()))]);
    clearTimeout(timer);
    this.#closed = true;
    clearTimeout(this.#retry);
    clearTimeout(this.#gathering);
    await this.#whenIdle();
    await new Promise<void>((resolve) => close(this.#fd, () => resolve()));
  }

  #openSync(): number {
    const fd = openSync(this.#path, 'a', this.#options.mode);
    this.#restrictMode(fd);
    return fd;
  }

  #restrictMode(fd: number): void {
    try {
      const stat = fstatSync(fd);
      // Group may read (0640); nobody else may do anything, and no one but the owner may write.
      if (stat.isFile() && (stat.mode & 0o037) !== 0) fchmodSync(fd, stat.mode & 0o740);
    } catch {
      // Not ours to change (a device such as /dev/null): leave it.
    }
  }

  #schedule(): void {
    if (this.#scheduled || this.#writing || this.#gathering || this.#retry || this.#reopening || this.#closed) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#flush();
    });
  }

  #flush(): void {
    if (this.#writing || this.#retry) return;
    if (!this.#inflight) {
      if (this.#pending.length === 0) return this.#notifyIdle();
      this.#inflight = Buffer.from(this.#pending.join(''), 'utf8');
      this.#pending = [];
      this.#pendingBytes = 0;
    }
    const batch = this.#inflight;
    this.#writing = true;
    write(this.#fd, batch, 0, batch.length, null, (error, written) => {
      if (error) {
        this.#writing = false;
        this.#fail(error);
        return this.#notifyIdle();
      }
      this.#inflight = written < batch.length ? batch.subarray(written) : undefined;
      const next = () => {
        this.#writing = false;
        if (this.#inflight === undefined) this.#recovered();
        if (this.#inflight) this.#flush();
        else if (this.#pending.length > 0) this.#gather();
        else this.#notifyIdle();
      };
      if (this.#options.fsync && this.#inflight === undefined) {
        fsync(this.#fd, (syncError) => {
          if (syncError) {
            this.#writing = false;
            this.#fail(syncError);
            return this.#notifyIdle();
          }
          next();
        });
      } else {
        next();
      }
    });
  }

  /** Lets the lines of the next `gatherMs` join the ones pending, then writes them in one go. */
  #gather(): void {
    if (this.#gathering) return;
    if (this.#options.gatherMs <= 0 || this.#closed) return this.#flush();
    this.#gathering = setTimeout(() => this.#writeGathered(), this.#options.gatherMs);
  }

  #writeGathered(): void {
    clearTimeout(this.#gathering);
    this.#gathering = undefined;
    // A reopen under way writes what is pending once the new file is open.
    if (!this.#reopening) this.#flush();
  }

  #fail(error: unknown): void {
    const code = (error as NodeJS.ErrnoException).code ?? 'EIO';
    const changed = this.#failure === undefined;
    this.#failure = code;
    if (changed) this.#options.onState?.({ writable: false, code });
    if (this.#closed) return;
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      this.#flush();
      // A batch that was written while failing means the disk is back.
      if (!this.#inflight && this.#pending.length === 0) this.#recovered();
    }, this.#options.retryMs);
    this.#retry.unref();
  }

  #recovered(): void {
    if (this.#failure === undefined) return;
    this.#failure = undefined;
    this.#options.onState?.({ writable: true });
  }

  #notifyIdle(): void {
    const waiting = this.#idle.splice(0);
    for (const resume of waiting) resume();
  }

  #whenIdle(): Promise<void> {
    if (!this.#writing) return Promise.resolve();
    return new Promise((resolve) => {
      const check = () => (this.#writing ? this.#idle.push(check) : resolve());
      this.#idle.push(check);
    });
  }
}
