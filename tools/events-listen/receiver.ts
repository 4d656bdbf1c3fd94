import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { verifyEvent, WebhookVerificationError } from '../../client/src/index.js';
import { eventLine } from './event-line.js';

/** More than any event the gateway sends (an event is about 1 KiB). */
const MAX_BODY_BYTES = 256 * 1024;

export interface ReceiverOptions {
  /** The endpoint's secrets (`whsec_...`): any of them may have signed a delivery. */
  readonly secrets: readonly string[];
  /** Gets one line per request: the event, or why it was refused. */
  readonly print: (line: string) => void;
}

function answer(response: ServerResponse, status: number, text?: string, headers: Record<string, string> = {}): void {
  response.writeHead(status, text === undefined ? headers : { 'content-type': 'text/plain; charset=utf-8', ...headers });
  response.end(text === undefined ? undefined : `${text}\n`);
}

/** The body's bytes exactly as received (the signature covers them), or undefined past the cap. */
async function rawBody(request: IncomingMessage): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

async function receive(options: ReceiverOptions, request: IncomingMessage, response: ServerResponse): Promise<void> {
  if (request.method !== 'POST') {
    options.print(`refused ${request.method ?? '?'} ${request.url ?? ''}: only POST delivers events`);
    return answer(response, 405, 'only POST', { allow: 'POST' });
  }
  const body = await rawBody(request);
  if (body === undefined) {
    options.print(`refused a body over ${MAX_BODY_BYTES} bytes`);
    return answer(response, 413, 'body too large', { connection: 'close' });
  }
  try {
    const event = verifyEvent(options.secrets, request.headers, body);
    options.print(eventLine(event));
    answer(response, 204);
  } catch (error) {
    if (!(error instanceof WebhookVerificationError)) throw error;
    const id = request.headers['webhook-id'];
    options.print(`refused ${error.reason}${typeof id === 'string' && id !== '' ? ` (webhook-id ${id})` : ''}: ${error.message}`);
    // Signed by the secret but not an event: the request is wrong, not its sender.
    answer(response, error.reason === 'malformed_body' ? 400 : 401, error.reason);
  }
}

/**
 * A webhook endpoint for development: verifies each delivery with the client's verifyEvent,
 * prints it, and answers 204 (verified), 401 (refused: headers, timestamp or signature), 400 (a
 * signed body that is no event), 405 or 413. Not listening yet: the caller binds it.
 */
export function createReceiver(options: ReceiverOptions): Server {
  return createServer((request, response) => {
    receive(options, request, response).catch((error: unknown) => {
      options.print(`failed: ${error instanceof Error ? error.message : String(error)}`);
      if (!response.headersSent) answer(response, 500, 'receiver failed');
      else response.destroy();
    });
  });
}
