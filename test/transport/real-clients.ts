import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';

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

export interface RawExchangeOptions {
  /** Over TLS (SNI `localhost`) trusting `ca`, with any other client options; plain TCP when absent. */
  tls?: { ca: string } & Partial<ConnectionOptions>;
  timeoutMs?: number;
}

export interface RawAnswer {
  received: Buffer;
  closedByServer: boolean;
}

/**
 * Opens a TCP (or, with `tls`, a TLS) connection to `url`'s host and port, writes `bytes` as they
 * are, and collects every byte until the server closes (a reset counts as a close) or
 * `timeoutMs` passes, which is reported as `closedByServer: false`.
 */
export function rawExchange(url: string, bytes: string | Buffer, options: RawExchangeOptions = {}): Promise<RawAnswer> {
  const target = new URL(url);
  const host = target.hostname.replace(/^\[|\]$/g, '');
  const port = Number(target.port);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let settled = false;
    const socket = options.tls
      ? tlsConnect({ host, port, servername: 'localhost', ...options.tls }, () => socket.write(bytes))
      : connect({ host, port }, () => socket.write(bytes));
    const finish = (closedByServer: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ received: Buffer.concat(chunks), closedByServer });
    };
    const timer = setTimeout(() => finish(false), options.timeoutMs ?? 5000);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('end', () => finish(true));
    socket.on('close', () => finish(true));
    socket.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNRESET' || error.code === 'EPIPE') finish(true);
      else if (!settled) {
        settled = true;
        clearTimeout(timer);
        socket.destroy();
        reject(error);
      }
    });
  });
}

/** One raw HTTP/1.x answer, as `parseHttpAnswer` reads it. */
export interface ParsedHttpAnswer {
  statusLine: string;
  rawHead: string;
  statusCode: number;
  headers: Record<string, string>;
  body: string;
}

/** One raw HTTP/1.x answer: status, lower-cased headers (repeated ones joined by ", "), de-chunked body. */
export function parseHttpAnswer(raw: Buffer): ParsedHttpAnswer {
  const text = raw.toString('latin1');
  const split = text.indexOf('\r\n\r\n');
  const head = split === -1 ? text : text.slice(0, split);
  const [statusLine = '', ...headerLines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of headerLines) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  let bodyBytes = split === -1 ? Buffer.alloc(0) : raw.subarray(Buffer.byteLength(text.slice(0, split + 4), 'latin1'));
  if (/chunked/i.test(headers['transfer-encoding'] ?? '')) bodyBytes = dechunk(bodyBytes);
  else if (headers['content-length'] !== undefined) bodyBytes = bodyBytes.subarray(0, Number(headers['content-length']));
  return { statusLine, rawHead: head, statusCode: Number(statusLine.split(' ')[1]), headers, body: bodyBytes.toString('utf8') };
}

function dechunk(bytes: Buffer): Buffer {
  const parts: Buffer[] = [];
  let offset = 0;
  for (;;) {
    const lineEnd = bytes.indexOf('\r\n', offset, 'latin1');
    if (lineEnd === -1) break;
    const size = Number.parseInt(bytes.subarray(offset, lineEnd).toString('latin1'), 16);
    if (!Number.isFinite(size) || size === 0) break;
    parts.push(bytes.subarray(lineEnd + 2, lineEnd + 2 + size));
    offset = lineEnd + 2 + size + 2;
  }
  return Buffer.concat(parts);
}
