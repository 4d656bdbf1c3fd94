import type { FastifyReply, FastifyRequest } from 'fastify';

/** The start of a card, cut: what `partial` sends before it closes the connection. */
const CUT_CARD = '{"cardId":"card_000000000000000000000000","pan":"4000000000000002"}';

/** Destroys the connection without an answer (`reset`). */
export function abortConnection(request: FastifyRequest, reply: FastifyReply): void {
  reply.hijack();
  request.raw.socket.destroy();
}

/** Status and headers of a whole answer, the start of its body, then the connection cut (`partial`). */
export function sendPartial(reply: FastifyReply, status: number): void {
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(CUT_CARD)) });
  // Destroy only once the fragment is flushed, so the client sees headers and a cut body.
  raw.write(CUT_CARD.slice(0, 20), () => raw.socket?.destroy());
}

/**
 * Answers held back on purpose (`delay`, `drip`). Each registers how to end it, so closing the
 * sandbox releases them at once instead of waiting them out.
 */
export class HeldAnswers {
  private readonly pending = new Set<() => void>();

  wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const release = (): void => {
        clearTimeout(timer);
        this.pending.delete(release);
        resolve();
      };
      const timer = setTimeout(release, ms);
      this.pending.add(release);
    });
  }

  /**
   * A connector that answers a byte at a time (a slow or congested processor): the status and
   * headers at once, then one byte of the body every `everyMs`, until the client gives up.
   */
  drip(reply: FastifyReply, status: number, body: unknown, everyMs: number): void {
    reply.hijack();
    const raw = reply.raw;
    const whole = Buffer.from(JSON.stringify(body));
    raw.writeHead(status, { 'content-type': 'application/json', 'content-length': String(whole.length) });
    let sent = 0;
    const stop = (): void => {
      clearTimeout(timer);
      this.pending.delete(stop);
      raw.destroy();
    };
    const next = (): void => {
      if (raw.destroyed || sent >= whole.length) {
        this.pending.delete(stop);
        if (!raw.destroyed) raw.end();
        return;
      }
      raw.write(whole.subarray(sent, sent + 1));
      sent += 1;
      timer = setTimeout(next, everyMs);
    };
    let timer = setTimeout(next, 0);
    this.pending.add(stop);
    raw.once('close', () => {
      clearTimeout(timer);
      this.pending.delete(stop);
    });
  }

  releaseAll(): void {
    for (const release of this.pending) release();
  }
}
