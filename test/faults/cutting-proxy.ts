import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy between the gateway and a real redis-server that can cut the connection at one
 * chosen command: the way a master dies between running a script and answering it (the
 * reply is lost), or a connection breaks just before a command is sent (the command is lost).
 * After the cut it refuses new connections for a while, like a failover in progress.
 */
export interface CuttingProxy {
  readonly url: string;
  /**
   * Cuts at the `occurrence`-th chunk the gateway sends that contains `match`. With `forward`
   * the chunk reaches Redis and runs, and only its reply is lost; without, it is lost too.
   * Resolves when the cut happened.
   */
  cutAt(options: { match: string; occurrence?: number; forward: boolean; outageMs: number }): Promise<void>;
  /** Cuts every connection now and refuses new ones for `outageMs` (Infinity: until {@link restore}). */
  cutNow(outageMs: number): void;
  /** Ends an outage now: new connections reach Redis again. */
  restore(): void;
  close(): Promise<void>;
}

export async function startCuttingProxy(redisPort: number): Promise<CuttingProxy> {
  const sockets = new Set<Socket>();
  let refuseUntil = 0;
  let plan: { match: string; left: number; forward: boolean; outageMs: number; done(): void } | undefined;

  const server: Server = createServer((client) => {
    if (performance.now() < refuseUntil) {
      client.destroy();
      return;
    }
    const upstream = connect(redisPort, '127.0.0.1');
    sockets.add(client);
    sockets.add(upstream);
    let cut = false;
    const cutBoth = () => {
      cut = true;
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (chunk: Buffer) => {
      if (cut) return;
      const armed = plan;
      if (armed && chunk.includes(armed.match)) {
        armed.left -= 1;
        if (armed.left === 0) {
          plan = undefined;
          refuseUntil = performance.now() + armed.outageMs;
          if (armed.forward) {
            upstream.write(chunk);
            // Whatever Redis answers from here on never reaches the gateway.
            upstream.removeAllListeners('data');
            upstream.once('data', () => cutBoth());
          } else {
            cutBoth();
          }
          armed.done();
          return;
        }
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!cut) client.write(chunk);
    });
    const forget = () => {
      cutBoth();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('close', forget);
    upstream.on('close', forget);
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('proxy has no port');
  return {
    url: `redis://127.0.0.1:${address.port}`,
    cutAt({ match, occurrence = 1, forward, outageMs }) {
      return new Promise((resolve) => {
        plan = { match, left: occurrence, forward, outageMs, done: resolve };
      });
    },
    cutNow(outageMs) {
      refuseUntil = performance.now() + outageMs;
      for (const socket of sockets) socket.destroy();
    },
    restore() {
      refuseUntil = 0;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
