import type { FastifyRequest } from 'fastify';
import { RECEIVED_LOG_SIZE, type ReceivedRequest, type SandboxStats } from './sandbox-types.js';

/** What reached `/v1/cards` and below: the proof tests use that nothing but the contract goes upstream. */
export class RequestLog {
  requestsReceived = 0;
  lastHeaders: SandboxStats['lastHeaders'] = null;
  lastBody: unknown = null;
  private readonly received: ReceivedRequest[] = [];

  /** On arrival, before any check: a refused request was still sent. */
  arrived(request: FastifyRequest): void {
    this.requestsReceived += 1;
    this.lastHeaders = { ...request.headers };
    this.received.push({ method: request.method, url: request.raw.url ?? '', headers: { ...request.headers } });
    if (this.received.length > RECEIVED_LOG_SIZE) this.received.shift();
    this.lastBody = null;
  }

  recent(): ReceivedRequest[] {
    return [...this.received];
  }

  clear(): void {
    this.requestsReceived = 0;
    this.lastHeaders = null;
    this.lastBody = null;
    this.received.length = 0;
  }
}
