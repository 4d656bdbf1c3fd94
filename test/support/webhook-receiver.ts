import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { waitFor } from './wait.js';

/** One request a receiver got: its headers and body as they arrived, and which connection carried it. */
export interface ReceivedRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  /** The connection's number (1: the receiver's first): equal for two requests on one kept-alive connection. */
  readonly connection: number;
}

/**
 * How the receiver answers a request: a status (and an optional body); `hold` keeps it waiting
 * until `release()` or the test ends; a function writes the answer itself (it gets the request,
 * already in `requests`).
 */
export type ReceiverAnswer =
  number | { status: number; body?: string; headers?: Record<string, string> } | 'hold' | ((response: ServerResponse, request: ReceivedRequest) => void);

export interface WebhookReceiver {
  readonly url: string;
  readonly requests: ReceivedRequest[];
  /** Connections accepted so far. */
  connections(): number;
  /** Connections closed so far. */
  closedConnections(): number;
  /** Whether the connection numbered `connection` (ReceivedRequest.connection) has closed. */
  isClosed(connection: number): boolean;
  /** What the next requests get (default 200). */
  answer(next: ReceiverAnswer): void;
  /** Answers the held requests, oldest first, with `status` (default 200): `count` of them, or all. */
  release(status?: number, count?: number): void;
  /** Requests waiting for an answer. */
  held(): number;
  waitForRequests(count: number): Promise<ReceivedRequest[]>;
  waitForHeld(count: number): Promise<void>;
  close(): Promise<void>;
}

/** A real HTTP receiver on a loopback port: webhooks arrive over a real socket, nothing is mocked. */
export async function startWebhookReceiver(initial: ReceiverAnswer = 200): Promise<WebhookReceiver> {
  const requests: ReceivedRequest[] = [];
  const held: ServerResponse[] = [];
  const sockets = new Set<Socket>();
  const numbers = new WeakMap<Socket, number>();
  let accepted = 0;
  let closed = 0;
  const closedNumbers = new Set<number>();
  let answer = initial;

  const reply = (response: ServerResponse, with_: ReceiverAnswer, request?: ReceivedRequest): void => {
    if (with_ === 'hold') {
      held.push(response);
      return;
    }
    if (typeof with_ === 'function') {
      if (request) with_(response, request);
      return;
    }
    const { status, body, headers } = typeof with_ === 'number' ? { status: with_, body: undefined, headers: undefined } : with_;
    response.writeHead(status, { 'content-type': 'text/plain', ...headers });
    response.end(body ?? '');
  };

  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const received: ReceivedRequest = {
        method: request.method ?? '',
        url: request.url ?? '',
        headers: request.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        connection: numbers.get(request.socket) ?? 0,
      };
      requests.push(received);
      reply(response, answer, received);
    });
  });
  server.on('connection', (socket: Socket) => {
    accepted += 1;
    numbers.set(socket, accepted);
    sockets.add(socket);
    socket.on('close', () => {
      closed += 1;
      closedNumbers.add(numbers.get(socket) ?? 0);
      sockets.delete(socket);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}/hooks/gateway`,
    requests,
    connections: () => accepted,
    closedConnections: () => closed,
    isClosed: (connection) => closedNumbers.has(connection),
    answer: (next) => {
      answer = next;
    },
    release: (status = 200, count = held.length) => {
      for (const response of held.splice(0, count)) if (!response.destroyed) reply(response, status);
    },
    held: () => held.length,
    waitForRequests: (count) => waitFor(`${count} webhook requests (${requests.length} so far)`, () => requests.length >= count && requests.slice(0, count)),
    waitForHeld: async (count) => {
      await waitFor(`${count} held webhook requests (${held.length} so far)`, () => held.length >= count);
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
