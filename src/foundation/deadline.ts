/**
 * Deadlines that tell a slow peer from a busy process.
 *
 * A plain timer fires in the event loop's timers phase, which runs before the poll phase that
 * reads sockets. When the process itself was busy for longer than the deadline (a burst of
 * requests to parse), the peer's answer is already waiting in the socket, yet the timer fires
 * first and the request fails as if the peer had not answered: under load, a healthy Redis or
 * connector would produce 503s and 504s. These deadlines, when their timer fires, wait one more
 * turn of the loop (setImmediate runs after the poll phase) and give up only if the answer has
 * still not been read.
 */

/** Settles with `work`, or rejects with `onLate()` when it has not settled `ms` after the call. */
export function withDeadline<T>(work: Promise<T>, ms: number, onLate: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => {
      setImmediate(() => {
        if (settled) return;
        settled = true;
        reject(onLate());
      });
    }, ms);
    work.then(
      (value) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

/** An AbortSignal that aborts `ms` after the call, with the same one-turn grace; `clear()` when done. */
export function deadlineSignal(ms: number): { signal: AbortSignal; clear(): void } {
  const controller = new AbortController();
  let immediate: NodeJS.Immediate | undefined;
  const timer = setTimeout(() => {
    immediate = setImmediate(() => controller.abort(Object.assign(new Error('deadline passed'), { name: 'TimeoutError' })));
  }, ms);
  return {
    signal: controller.signal,
    clear: () => {
      clearTimeout(timer);
      if (immediate) clearImmediate(immediate);
    },
  };
}
