import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';

/** Real-socket clients for the transport, observability and entry-point tests. */

export interface RealResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface RealRequestOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** PEM the HTTPS client trusts (the test certificate). */
  ca?: string;
}

/** One request on a fresh connection (no keep-alive agent), over https: or http: by the URL. */
export function realRequest(url: string, options: RealRequestOptions = {}): Promise<RealResponse> {
  const target = new URL(url);
  const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  if (options.body !== undefined) {
    headers['content-type'] ??= 'application/json';
    headers['content-length'] = String(Buffer.byteLength(options.body));
  }
  return new Promise((resolve, reject) => {
    const req = send(target, { method: options.method ?? 'GET', headers, agent: false, ...(options.ca !== undefined && { ca: options.ca }) }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

/**
 * Writes raw bytes to host:port and collects everything the server sends until it closes
 * the socket (or `timeoutMs` passes, which is reported as `closedByServer: false`).
 */
export function rawExchange(host: string, port: number, bytes: string | Buffer, timeoutMs = 5000): Promise<{ received: Buffer; closedByServer: boolean }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    const chunks: Buffer[] = [];
    let settled = false;
    const finish = (closedByServer: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ received: Buffer.concat(chunks), closedByServer });
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    socket.on('connect', () => socket.write(bytes));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('end', () => finish(true));
    socket.on('close', () => finish(true));
    socket.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNRESET' || error.code === 'EPIPE') finish(true);
      else if (!settled) {
        settled = true;
        clearTimeout(timer);
        reject(error);
      }
    });
  });
}

/** Splits a raw HTTP/1.1 response into status, lower-cased headers and body. */
export function parseRawResponse(raw: string): { status: number; headers: Record<string, string>; body: string } {
  const split = raw.indexOf('\r\n\r\n');
  const head = split === -1 ? raw : raw.slice(0, split);
  const [statusLine = '', ...headerLines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of headerLines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body: split === -1 ? '' : raw.slice(split + 4) };
}

/** Polls `check` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function waitFor<T>(
  what: string | (() => string),
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 10_000,
  intervalMs = 25,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
