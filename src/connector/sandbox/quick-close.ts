import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';

/**
 * Node's server.close() waits for every socket, including ones a pooling client opened but
 * never used, until the client's keep-alive timer fires (seconds). Tests and benchmarks close
 * sandboxes often, so closing ends idle sockets at once and busy ones after their answer;
 * `beforeClose` releases answers held back on purpose so that none is waited out.
 */
export function closeQuickly(app: FastifyInstance, tls: boolean, beforeClose: () => void): void {
  const activeRequests = new Map<Socket, number>();
  let closing = false;
  // Requests see the TLS socket, not the TCP one 'connection' reports.
  app.server.on(tls ? 'secureConnection' : 'connection', (socket: Socket) => {
    activeRequests.set(socket, 0);
    socket.once('close', () => activeRequests.delete(socket));
  });
  app.server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket;
    activeRequests.set(socket, (activeRequests.get(socket) ?? 0) + 1);
    response.once('close', () => {
      const left = (activeRequests.get(socket) ?? 1) - 1;
      activeRequests.set(socket, left);
      if (closing && left === 0) socket.end();
    });
  });
  app.addHook('preClose', (done) => {
    closing = true;
    beforeClose();
    for (const [socket, active] of activeRequests) if (active === 0) socket.destroy();
    done();
  });
}
