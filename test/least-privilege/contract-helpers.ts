import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import type { IncomingHttpHeaders } from 'node:http';
import { expect } from 'vitest';
import type { Gateway } from '../../src/app.js';
import type { TestGateway } from '../support/gateway-fixture.js';

/**
 * Assertions and clients shared by the least-privilege suites (issue 9): the error envelope with
 * its new `code` (contract-8-9.md), the aggregated audit lines, and raw TLS exchanges.
 */

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Anything with a status, headers and a text body: inject() answers and real-socket answers. */
export interface AnyResponse {
  statusCode: number;
  headers: IncomingHttpHeaders | Record<string, string | string[] | number | undefined>;
  body: string;
}

export interface Envelope {
  correlationId: string;
  status: number;
  code: string;
  message: string;
  details: { fields?: { path: string; message: string }[]; fieldsOmitted?: number; [key: string]: unknown };
  timestamp: string;
  retryAfter?: number;
}

/**
 * The contract's envelope: `{ correlationId, status, code, message, details, timestamp }`, the
 * X-Correlation-Id header equal to `correlationId`, a JSON content type.
 */
export function expectContractError(response: AnyResponse, status: number, code: string, message: string): Envelope {
  const context = `${response.statusCode} ${response.body.slice(0, 400)}`;
  expect(response.statusCode, context).toBe(status);
  expect(String(response.headers['content-type']), context).toMatch(/^application\/json/);
  let body: Envelope;
  try {
    body = JSON.parse(response.body) as Envelope;
  } catch {
    throw new Error(`the answer is not a JSON envelope: ${context}`);
  }
  expect({ status: body.status, code: body.code, message: body.message }, context).toEqual({ status, code, message });
  expect(body.correlationId, context).toMatch(UUID);
  expect(response.headers['x-correlation-id'], context).toBe(body.correlationId);
  expect(typeof body.details === 'object' && body.details !== null && !Array.isArray(body.details), context).toBe(true);
  expect(new Date(String(body.timestamp)).toISOString(), context).toBe(body.timestamp);
  return body;
}

/** 400 validation_failed naming `path` with exactly `message`. */
export function expectContractFieldError(response: AnyResponse, path: string, message: string): Envelope {
  const body = expectContractError(response, 400, 'validation_failed', 'Request validation failed');
  const fields = body.details.fields ?? [];
  expect(fields, `expected ${path}: ${message}`).toContainEqual({ path, message });
  return body;
}

/** Every audit line the gateway wrote so far, as parsed JSON (aggregated lines have extra fields). */
export function auditRecords(gw: TestGateway): Record<string, unknown>[] {
  return gw.audit.lines.map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** `gateway.flushAudit()` (contract: writes every open aggregation window at once). */
export async function flushAudit(gateway: Gateway): Promise<void> {
  const flush = (gateway as Gateway & { flushAudit?: () => unknown }).flushAudit;
  if (typeof flush !== 'function') throw new Error('gateway.flushAudit() does not exist: aggregated denial lines cannot be flushed');
  await flush.call(gateway);
}

/** The aggregated `access.denied` lines (those with a `count`). */
export function aggregatedDenials(gw: TestGateway): Record<string, unknown>[] {
  return auditRecords(gw).filter((record) => record['event'] === 'access.denied' && record['count'] !== undefined);
}

export interface RawTlsAnswer {
  received: Buffer;
  closedByServer: boolean;
}

/**
 * Opens a TLS connection to `url`'s host and port, writes `bytes` as they are, and collects every
 * byte until the server closes (or `timeoutMs`, then `closedByServer` is false).
 */
export function tlsExchange(url: string, bytes: string | Buffer, ca: string, timeoutMs = 5000, extra: Partial<ConnectionOptions> = {}): Promise<RawTlsAnswer> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let settled = false;
    const socket = tlsConnect({ host: target.hostname, port: Number(target.port), ca, servername: 'localhost', ...extra }, () => {
      socket.write(bytes);
    });
    const finish = (closedByServer: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ received: Buffer.concat(chunks), closedByServer });
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
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

/** One raw HTTP/1.x answer: status, lower-cased headers (repeated ones joined by ", "), de-chunked body. */
export function parseHttpAnswer(raw: Buffer): AnyResponse & { statusLine: string; rawHead: string } {
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

/** Headers of an answer without the ones that differ per request by design. */
export function stableHeaders(headers: AnyResponse['headers'], volatile: readonly string[] = ['x-correlation-id', 'date']): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || volatile.includes(name.toLowerCase())) continue;
    out[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  return out;
}
