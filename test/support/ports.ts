import { connect } from 'node:net';

/** The loopback port finder shared with the benchmark (tools/launch/). */
export { freePort } from '../../tools/launch/ports.js';

/** Resolves with the error code of a TCP connection attempt, or 'connected'. */
export async function connectOutcome(url: string, timeoutMs = 3000): Promise<string> {
  const target = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: target.hostname.replace(/^\[|\]$/g, ''), port: Number(target.port) });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve('timeout');
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve(error.code ?? error.message);
    });
  });
}
