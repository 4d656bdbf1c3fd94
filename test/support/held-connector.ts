import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { waitFor } from './wait.js';

/**
 * A loopback proxy in front of a real sandbox connector that holds every card request
 * (`POST /v1/cards...`) until the test releases it: "the connector is still working" as a state
 * the test controls, instead of a delay that a busy machine can outrun or overrun. Everything
 * else (the `/__control` endpoints) passes straight through.
 */
export interface HeldConnector {
  /** Point the gateway here. */
  readonly url: string;
  /** Card requests that have arrived so far (held or released). */
  arrived(): number;
  /** Waits (hang guard) until `count` card requests have arrived and are held. */
  waitForHeld(count: number): Promise<void>;
  /** Forwards every held request, and every later one, to the connector. */
  release(): void;
  close(): Promise<void>;
}

export async function startHeldConnector(upstreamUrl: string): Promise<HeldConnector> {
  const upstream = new URL(upstreamUrl);
  const held: (() => void)[] = [];
  let arrived = 0;
  let released = false;

  const forward = (req: IncomingMessage, body: Buffer, res: ServerResponse): void => {
    const out = request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    out.on('error', () => res.destroy());
    out.end(body);
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const isCard = req.method === 'POST' && (req.url ?? '').startsWith('/v1/cards');
      if (!isCard) return forward(req, body, res);
      arrived += 1;
      if (released) return forward(req, body, res);
      held.push(() => forward(req, body, res));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    arrived: () => arrived,
    waitForHeld: async (count) => {
      await waitFor(`${count} card requests held at the connector (${held.length} so far)`, () => held.length >= count);
    },
    release: () => {
      released = true;
      for (const send of held.splice(0)) send();
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
