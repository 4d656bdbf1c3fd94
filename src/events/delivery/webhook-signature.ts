import { createHmac } from 'node:crypto';

/**
 * Standard Webhooks 1.0 signing (D65), the published scheme and nothing of our own, so that a
 * receiver can check a delivery with any of its libraries:
 *
 *   webhook-id:        the event id (a receiver drops a repeat by it)
 *   webhook-timestamp: when it was sent, integer seconds since the epoch
 *   webhook-signature: `v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`, one per secret,
 *                      space-separated (the old and the new one while a secret is rotated)
 *
 * The key is the base64 text after `whsec_`, decoded. The body signed is the exact text sent.
 */

const PREFIX = 'whsec_';
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export interface WebhookHeaders {
  readonly 'webhook-id': string;
  readonly 'webhook-timestamp': string;
  readonly 'webhook-signature': string;
}

/**
 * The signing key of a `whsec_<base64>` secret. A malformed secret is a configuration mistake
 * (the config loader refuses it): a TypeError whose message does not repeat the secret.
 */
export function webhookKey(secret: string): Buffer {
  const encoded = secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : undefined;
  if (encoded === undefined || encoded.length === 0 || !BASE64.test(encoded)) throw new TypeError('a webhook secret must be whsec_ followed by base64');
  return Buffer.from(encoded, 'base64');
}

/** One `v1,<base64>` signature of the body under one key. */
export function signatureOf(key: Buffer, id: string, timestampSeconds: number, body: string): string {
  return `v1,${createHmac('sha256', key).update(`${id}.${timestampSeconds}.`).update(body).digest('base64')}`;
}

/** The three headers of one delivery, signed with every key (the first is the current secret). */
export function signWebhook(keys: readonly Buffer[], id: string, timestampSeconds: number, body: string): WebhookHeaders {
  if (!Number.isSafeInteger(timestampSeconds)) throw new TypeError('the webhook timestamp must be integer seconds');
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': keys.map((key) => signatureOf(key, id, timestampSeconds, body)).join(' '),
  };
}
