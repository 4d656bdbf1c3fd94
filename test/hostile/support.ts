import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { closeSync, openSync, readdirSync, writeSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest, type Agent } from 'node:https';
import { connect as netConnect, type Socket } from 'node:net';
import { join } from 'node:path';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { afterEach, beforeAll, expect } from 'vitest';
import { listenGateway, type RunningGateway } from '../../src/server.js';
import { RELAXED_LIMITS } from '../support/auth-requests.js';
import { createTestGateway, PASSWORD, testCertificatePem, type TestGateway, type TestGatewayOptions } from '../support/gateway-fixture.js';
import { expectContractError, type Envelope } from '../support/envelope.js';
import type { RunningProcess } from '../support/process.js';
import { HANG_GUARD_MS, waitFor } from '../support/wait.js';

/**
 * Shared helpers of the hostile-traffic suite (issue 8, D25-D27, D29): real TLS listeners,
 * real sockets bound to chosen loopback source addresses, the real entry point as a child
 * process, and assertions on the coded error envelope of the contract.
 *
 * Loopback only: 127.0.0.1 and 127.0.0.2 are allowlisted clients, 127.0.0.3 is an outsider.
 */

export const INSIDER = '127.0.0.1';
export const SECOND_INSIDER = '127.0.0.2';
export const OUTSIDER = '127.0.0.3';
/** An allowlist that admits the two insiders and refuses the outsider. */
export const INSIDERS_ONLY = [`${INSIDER}/32`, `${SECOND_INSIDER}/32`];

export const LOGIN_PATH = '/api/v1/auth/login';
export const CARDS_PATH = '/api/v1/issuing/cards';
export const JWKS_PATH = '/.well-known/jwks.json';

export interface HttpAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  /** Wall time from sending to the last byte of the answer. */
  ms: number;
}

export interface CallOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** PEM the HTTPS client trusts. */
  ca?: string;
  /** Source address of the client socket (ignored when an agent is given: set it on the agent). */
  localAddress?: string;
  /** A keep-alive agent; default a fresh connection per call. */
  agent?: Agent;
  /** Rejects when no complete answer arrived in time (a frozen gateway never hangs a test). */
  timeoutMs?: number;
  /** Called once the connection is usable: connected (http:) or its TLS handshake done (https:). */
  onConnected?: () => void;
}

/** One HTTP(S) request; https: or http: by the URL. Never waits longer than `timeoutMs`. */
export function call(url: string, options: CallOptions = {}): Promise<HttpAnswer> {
  const target = new URL(url);
  const method = options.method ?? (options.body === undefined ? 'GET' : 'POST');
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  if (options.body !== undefined) {
    headers['content-type'] ??= 'application/json';
    headers['content-length'] = String(Buffer.byteLength(options.body));
  }
  const timeoutMs = options.timeoutMs ?? HANG_GUARD_MS;
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(
      target,
      {
        method,
        headers,
        agent: options.agent ?? false,
        ...(options.ca !== undefined && { ca: options.ca }),
        ...(options.agent === undefined && options.localAddress !== undefined && { localAddress: options.localAddress }),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          clearTimeout(timer);
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8'), ms: performance.now() - started });
        });
        res.on('error', (error) => {
          clearTimeout(timer);
          reject(error);
        });
      },
    );
    const timer = setTimeout(() => {
      req.destroy(new Error(`no answer within ${timeoutMs} ms: ${method} ${target.pathname}`));
    }, timeoutMs);
    req.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    const { onConnected } = options;
    if (onConnected !== undefined) {
      req.once('socket', (socket) => socket.once(target.protocol === 'https:' ? 'secureConnect' : 'connect', onConnected));
    }
    req.end(options.body);
  });
}

export type { Envelope } from '../support/envelope.js';

/** The contract's coded envelope (test/support/envelope.ts's expectContractError) on a `call` answer. */
export function expectCodedError(answer: HttpAnswer, status: number, code: string, message: string): Envelope {
  return expectContractError({ statusCode: answer.status, headers: answer.headers, body: answer.body }, status, code, message);
}

/** `retryAfter` is a whole number of seconds >= 1 and the Retry-After header says the same. */
export function expectRetryAfter(answer: HttpAnswer, envelope: Envelope, exactly?: number): void {
  expect(Number.isInteger(envelope.retryAfter)).toBe(true);
  expect(envelope.retryAfter).toBeGreaterThanOrEqual(1);
  if (exactly !== undefined) expect(envelope.retryAfter).toBe(exactly);
  expect(answer.headers['retry-after']).toBe(String(envelope.retryAfter));
}

/** Logs in over real TLS and returns the access token. */
export async function loginOverTls(
  httpsUrl: string,
  ca: string,
  options: { username?: string; password?: string; localAddress?: string } = {},
): Promise<string> {
  const answer = await call(`${httpsUrl}${LOGIN_PATH}`, {
    ca,
    body: JSON.stringify({ username: options.username ?? 'full', password: options.password ?? PASSWORD }),
    ...(options.localAddress !== undefined && { localAddress: options.localAddress }),
    timeoutMs: 10_000,
  });
  expect(answer.status, answer.body).toBe(200);
  return (JSON.parse(answer.body) as { accessToken: string }).accessToken;
}

export { metricSum } from '../support/metrics.js';

/** GET on the admin listener (plain HTTP), bounded by a hang guard (a busy machine answers late, not never). */
export function adminGet(adminUrl: string, path: string, timeoutMs = HANG_GUARD_MS): Promise<HttpAnswer> {
  return call(`${adminUrl}${path}`, { timeoutMs });
}

export { sleep } from '../support/wait.js';

// ---------------------------------------------------------------------------------------------
// In-process gateway on real listeners
// ---------------------------------------------------------------------------------------------

export interface ListeningGateway {
  gw: TestGateway;
  running: RunningGateway;
  httpsUrl: string;
  httpsPort: number;
  adminUrl: string;
  close(): Promise<void>;
}

/**
 * A test gateway (createTestGateway) on a real TLS listener and admin listener, both on
 * 127.0.0.1 with free ports. Clients are direct peers: no trusted proxy unless overridden.
 */
export async function listenTestGateway(options: TestGatewayOptions = {}): Promise<ListeningGateway> {
  const gw = await createTestGateway({ ...options, overrides: { trustedProxies: [], ...(options.overrides ?? {}) } });
  let running: RunningGateway;
  try {
    running = await listenGateway(gw.gateway, { https: { host: INSIDER, port: 0 }, admin: { host: INSIDER, port: 0 } });
  } catch (error) {
    await gw.close();
    throw error;
  }
  let closed: Promise<void> | undefined;
  return {
    gw,
    running,
    httpsUrl: running.httpsUrl,
    httpsPort: Number(new URL(running.httpsUrl).port),
    adminUrl: running.adminUrl,
    close: () =>
      (closed ??= (async () => {
        try {
          await running.close();
        } finally {
          await gw.close();
        }
      })()),
  };
}

export interface CardClientGateway extends ListeningGateway {
  /** An access token of `full`, logged in over TLS. */
  token: string;
  /** POSTs a fresh valid card (10 000 EUR) with the token: through `agent` when given, else on a fresh connection trusting `ca`. */
  createCard(timeoutMs: number, agent?: Agent): Promise<HttpAnswer>;
}

/**
 * A listening gateway (relaxed rate limits) forwarding to the `connector` section given, with a
 * session of `full` already logged in over TLS, for the suites about the connector pool.
 */
export async function listenCardGateway(ca: string, connector: Record<string, unknown>): Promise<CardClientGateway> {
  const listening = await listenTestGateway({ overrides: { connector, rateLimits: RELAXED_LIMITS } });
  let token: string;
  try {
    token = await loginOverTls(listening.httpsUrl, ca);
  } catch (error) {
    await listening.close();
    throw error;
  }
  return {
    ...listening,
    token,
    createCard: (timeoutMs, agent) =>
      call(`${listening.httpsUrl}${CARDS_PATH}`, {
        ...(agent ? { agent } : { ca }),
        headers: { authorization: `Bearer ${token}` },
        body: JSON.stringify({ requestId: randomUUID(), cardLimit: 10_000, currency: 'EUR' }),
        timeoutMs,
      }),
  };
}

/** What a suite that starts its gateway inside each test holds: filled in by the test, released by perTestGateway. */
export interface PerTestGateway {
  /** The PEM of the test certificate, read once before the suite. */
  ca: string;
  listening: ListeningGateway | undefined;
  agent: Agent | undefined;
}

/**
 * Registers the hooks of such a suite: the test certificate read before all tests, and after
 * each test the keep-alive agent destroyed, then the gateway closed, then `alsoAfterEach`.
 */
export function perTestGateway(alsoAfterEach?: () => Promise<void>): PerTestGateway {
  const state: PerTestGateway = { ca: '', listening: undefined, agent: undefined };
  beforeAll(async () => {
    state.ca = await testCertificatePem();
  });
  afterEach(async () => {
    state.agent?.destroy();
    state.agent = undefined;
    await state.listening?.close();
    state.listening = undefined;
    await alsoAfterEach?.();
  });
  return state;
}

// ---------------------------------------------------------------------------------------------
// Raw sockets
// ---------------------------------------------------------------------------------------------

/** Every socket a test opened, destroyed in afterEach whatever happened. */
export class SocketPool {
  readonly #sockets = new Set<Socket>();

  track<T extends Socket>(socket: T): T {
    this.#sockets.add(socket);
    socket.once('close', () => this.#sockets.delete(socket));
    // A reset by the server is an expected outcome here, never an unhandled error.
    socket.on('error', () => undefined);
    return socket;
  }

  get open(): number {
    return this.#sockets.size;
  }

  destroyAll(): void {
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
  }
}

/**
 * A TCP connection from `localAddress`; resolves once connected (no byte sent), rejects when it
 * fails or closes first. `timeoutMs` is a hang guard only.
 */
export function openTcp(pool: SocketPool, port: number, localAddress: string, timeoutMs = HANG_GUARD_MS): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = pool.track(netConnect({ host: INSIDER, port, localAddress }));
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`TCP connect from ${localAddress} not established within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      resolve(socket);
    });
    socket.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    // After 'connect' this changes nothing: the promise is settled.
    socket.once('close', () => {
      clearTimeout(timer);
      reject(new Error(`TCP connection from ${localAddress} closed before it was established`));
    });
  });
}

/**
 * A TLS connection from `localAddress`; resolves once the handshake is done, rejects when it
 * fails or the connection closes first (a gateway that closes before the handshake).
 * `timeoutMs` is a hang guard only.
 */
export function openTls(pool: SocketPool, port: number, localAddress: string, ca: string, timeoutMs = HANG_GUARD_MS): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    // The TCP socket is made first so that it can be bound to `localAddress`.
    const tcp = pool.track(netConnect({ host: INSIDER, port, localAddress }));
    const socket = pool.track(tlsConnect({ socket: tcp, ca, servername: 'localhost' }));
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`TLS handshake from ${localAddress} not done within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once('secureConnect', () => {
      clearTimeout(timer);
      resolve(socket);
    });
    socket.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    // After 'secureConnect' this changes nothing: the promise is settled.
    socket.once('close', () => {
      clearTimeout(timer);
      reject(new Error(`TLS connection from ${localAddress} closed before its handshake`));
    });
  });
}

/**
 * Resolves with the milliseconds from `since` until the peer closed `socket` (end, close or
 * reset), or with undefined when it is still open after `timeoutMs`. Collects what arrived.
 */
export function closedWithin(socket: Socket, since: number, timeoutMs: number): Promise<{ ms: number | undefined; received: Buffer }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    const finish = (ms: number | undefined) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.off('data', onData);
      resolve({ ms, received: Buffer.concat(chunks) });
    };
    const onData = (chunk: Buffer) => chunks.push(chunk);
    socket.on('data', onData);
    const closedNow = () => finish(performance.now() - since);
    if (socket.destroyed || socket.readableEnded) {
      closedNow();
      return;
    }
    socket.once('end', closedNow);
    socket.once('close', closedNow);
    socket.once('error', closedNow);
    timer = setTimeout(() => finish(undefined), Math.max(0, timeoutMs - (performance.now() - since)));
  });
}

// ---------------------------------------------------------------------------------------------
// The real entry point as a child process (spawned with test/support/process.ts's spawnEntry)
// ---------------------------------------------------------------------------------------------

/**
 * Lowers the open-file limit of a running process to what it has open now plus `headroom`
 * (prlimit(1)), to show what exhausting its descriptors does. Returns the new limit.
 */
export function limitOpenFiles(pid: number, headroom: number): number {
  const open = readdirSync(`/proc/${pid}/fd`).length;
  const limit = open + headroom;
  execFileSync('prlimit', ['--pid', String(pid), `--nofile=${limit}:${limit}`], { stdio: 'pipe' });
  return limit;
}

/** Resolves with the exit, or with undefined when the process is still running after `timeoutMs`. */
export async function exitWithin(
  processUnderTest: RunningProcess,
  timeoutMs: number,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number } | undefined> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), timeoutMs);
  });
  const result = await Promise.race([processUnderTest.exited.then((exit) => ({ ...exit, ms: performance.now() - started })), timedOut]);
  clearTimeout(timer);
  return result;
}

class ExitedEarly extends Error {}

/** Polls the admin /healthz until it answers 200 (the process is up); fails at once if it exited. */
export async function waitUntilHealthy(adminUrl: string, processUnderTest: RunningProcess): Promise<void> {
  await waitFor(
    () => `the admin listener to answer /healthz; stderr:\n${processUnderTest.stderr().slice(-3000)}`,
    async () => {
      if (processUnderTest.hasExited())
        throw new ExitedEarly(`the gateway exited before it answered /healthz; stderr:\n${processUnderTest.stderr().slice(-3000)}`);
      return (await adminGet(adminUrl, '/healthz', 5000)).status === 200;
    },
    { intervalMs: 100, stopOn: (error) => error instanceof ExitedEarly },
  );
}

// ---------------------------------------------------------------------------------------------
// Disk space
// ---------------------------------------------------------------------------------------------

/**
 * Fills the file system that holds `dir` with one file, until not one more byte fits.
 * Returns the filler's path (delete it to give the space back).
 */
export function fillVolume(dir: string): string {
  const path = join(dir, 'filler.bin');
  const fd = openSync(path, 'w');
  try {
    for (const size of [64 * 1024, 4096, 512, 1]) {
      const chunk = Buffer.alloc(size, 0x61);
      for (;;) {
        try {
          writeSync(fd, chunk);
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === 'ENOSPC') break;
          throw error;
        }
      }
    }
  } finally {
    closeSync(fd);
  }
  return path;
}

/** Runs `work` over `items` with at most `concurrency` in flight; results in item order. */
export async function mapBounded<T, R>(items: readonly T[], concurrency: number, work: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    for (;;) {
      const index = next;
      next += 1;
      if (index >= items.length) return;
      results[index] = await work(items[index] as T, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  return results;
}
