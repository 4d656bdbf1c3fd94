import { Agent } from 'undici';
import type { LookupFunction } from 'node:net';
import { guardedConnector } from './egress-guard.js';
import { signWebhook, webhookKey } from './webhook-signature.js';

/** Bytes of an endpoint's answer read before it is dropped: its body is never kept or logged. */
export const MAX_ANSWER_BYTES = 4096;

/** Where one delivery goes and how it is signed: the parts of an endpoint's config the sender reads. */
export interface WebhookTarget {
  readonly url: string;
  /** `whsec_<base64>` secrets; every one signs (D65: the new and the old one while rotating). */
  readonly secrets: readonly string[];
  readonly timeoutMs: number;
}

/**
 * What one attempt came to: delivered (2xx), gone (410: the endpoint asks for no more), refused
 * (the egress guard refused its address), or another error worth a retry, in a few words
 * (`status 500`, `redirect 302`, `timeout`, `connection refused`), never the answer's body.
 */
export type SendResult =
  | { readonly outcome: 'delivered'; readonly status: number }
  | { readonly outcome: 'gone' }
  | { readonly outcome: 'refused'; readonly error: string }
  | { readonly outcome: 'error'; readonly error: string };

export interface WebhookSender {
  /** POSTs the event's JSON, exactly as stored, to the target; never rejects. `now` (epoch ms) is the signature's timestamp. */
  send(target: WebhookTarget, event: { readonly id: string; readonly json: string }, now: number): Promise<SendResult>;
  /** Ends every connection, in flight or idle. */
  close(): Promise<void>;
}

export interface WebhookSenderOptions {
  /** The egress guard (egress-guard.ts `egressGuarded`). */
  readonly guarded: boolean;
  /** The resolver behind the guard; by default the system's. */
  readonly resolve?: LookupFunction;
  /** Trusted CAs instead of the system's (tests). */
  readonly ca?: string | Buffer;
  /** Sent as User-Agent. */
  readonly userAgent?: string;
}

const REFUSED_MESSAGE = 'address refused by egress guard';

/** A failure in a few words, from the error's code only: a message may name the URL. */
function reasonOf(error: unknown, timedOut: boolean): SendResult {
  if (timedOut) return { outcome: 'error', error: 'timeout' };
  const { code } = error as { code?: unknown };
  switch (code) {
    case 'EGRESS_REFUSED':
      return { outcome: 'refused', error: REFUSED_MESSAGE };
    case 'ECONNREFUSED':
      return { outcome: 'error', error: 'connection refused' };
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EAI_NODATA':
      return { outcome: 'error', error: 'name not resolved' };
    case 'UND_ERR_CONNECT_TIMEOUT':
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
    case 'ETIMEDOUT':
      return { outcome: 'error', error: 'timeout' };
    case 'ECONNRESET':
    case 'EPIPE':
    case 'UND_ERR_SOCKET':
    case 'UND_ERR_CLOSED':
      return { outcome: 'error', error: 'connection reset' };
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return { outcome: 'error', error: 'host unreachable' };
    default:
      break;
  }
  // TLS failures carry codes like CERT_HAS_EXPIRED or ERR_TLS_CERT_ALTNAME_INVALID: short and safe to show.
  if (typeof code === 'string' && /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_)/.test(code))
    return { outcome: 'error', error: `tls ${code}` };
  return { outcome: 'error', error: 'request failed' };
}

/**
 * Reads at most MAX_ANSWER_BYTES of an answer's body and drops them. Read to its end, the
 * connection stays pooled; past the limit (or past the deadline) the body is destroyed and the
 * connection with it. The status already decided the outcome: a body that fails is no failure.
 */
async function drain(body: AsyncIterable<unknown> & { destroy(): unknown }): Promise<void> {
  let read = 0;
  try {
    for await (const chunk of body) {
      read += (chunk as Buffer).length;
      // Leaving the loop early destroys the body.
      if (read >= MAX_ANSWER_BYTES) return;
    }
  } catch {
    body.destroy();
  }
}

/**
 * Sends deliveries with undici through the egress guard. No redirect is followed (undici follows
 * none unless told; a 3xx is an error to retry, since following it would let any endpoint point
 * the gateway elsewhere). One deadline, `timeoutMs`, covers connecting, the answer's headers and
 * the first 4 KiB of its body (an answer whose status arrived in time counts, however its body
 * ends); the rest is never read: the connection is dropped instead, so a
 * receiver that answers slowly or at length holds nothing of the gateway's.
 */
export function createWebhookSender(options: WebhookSenderOptions): WebhookSender {
  const agent = new Agent({
    connect: guardedConnector({ guarded: options.guarded, resolve: options.resolve, ca: options.ca }),
    keepAliveTimeout: 30_000,
    // Backstops: the deadline below ends every request first.
    headersTimeout: 0,
    bodyTimeout: 0,
  });
  const keys = new Map<string, Buffer>();
  const keyOf = (secret: string): Buffer => {
    let key = keys.get(secret);
    if (key === undefined) {
      // A reload may rotate secrets: the map is rebuilt rather than let grow with old ones.
      if (keys.size > 256) keys.clear();
      key = webhookKey(secret);
      keys.set(secret, key);
    }
    return key;
  };
  const userAgent = options.userAgent ?? 'card-issuing-gateway-webhooks';

  return {
    async send(target, event, now) {
      const aborter = new AbortController();
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        aborter.abort();
      }, target.timeoutMs);
      try {
        const url = new URL(target.url);
        const signed = signWebhook(target.secrets.map(keyOf), event.id, Math.floor(now / 1000), event.json);
        const answer = await agent.request({
          origin: url.origin,
          path: `${url.pathname}${url.search}`,
          method: 'POST',
          headers: { 'content-type': 'application/json', 'user-agent': userAgent, ...signed },
          body: event.json,
          signal: aborter.signal,
        });
        await drain(answer.body);
        const status = answer.statusCode;
        if (status >= 200 && status < 300) return { outcome: 'delivered', status };
        if (status === 410) return { outcome: 'gone' };
        if (status >= 300 && status < 400) return { outcome: 'error', error: `redirect ${status}` };
        return { outcome: 'error', error: `status ${status}` };
      } catch (error) {
        return reasonOf(error, timedOut);
      } finally {
        clearTimeout(timer);
      }
    },
    async close() {
      await agent.destroy();
    },
  };
}
