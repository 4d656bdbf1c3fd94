import { createHmac, timingSafeEqual } from 'node:crypto';
import type { GatewayEvent } from './event-types.js';

/**
 * Checking a webhook delivery (Standard Webhooks 1.0, D65): `webhook-signature` holds one or more
 * `v1,<base64 HMAC-SHA256>` of `<webhook-id>.<webhook-timestamp>.<body>`, keyed with the bytes of
 * an endpoint secret (`whsec_<base64>`), one per secret the gateway holds while it rotates them.
 */

/** Why a delivery was refused, in the order the checks run. */
export type WebhookVerificationReason =
  /** A secret is not `whsec_` followed by base64 (or none was given): the receiver's configuration, not the delivery. */
  | 'bad_secret'
  /** `webhook-id`, `webhook-timestamp` or `webhook-signature` is absent or empty, or the timestamp is not whole seconds. */
  | 'missing_headers'
  /** The timestamp is further than the tolerance from now, in the past or in the future (a replay, or a skewed clock). */
  | 'timestamp_outside_tolerance'
  /** No `v1` signature of the header matches any of the secrets: another secret, or a body changed on the way. */
  | 'bad_signature'
  /** Signed correctly, but not an event: not UTF-8 JSON with the event's members. */
  | 'malformed_body';

export class WebhookVerificationError extends Error {
  readonly reason: WebhookVerificationReason;

  constructor(reason: WebhookVerificationReason, message: string) {
    super(message);
    this.name = 'WebhookVerificationError';
    this.reason = reason;
  }
}

/**
 * A request's headers: a fetch `Headers`, or a plain object such as node:http's
 * `request.headers`. Names are matched without regard to case.
 */
export type WebhookHeaders = Headers | Readonly<Record<string, string | readonly string[] | undefined>>;

export interface VerifyEventOptions {
  /** How far `webhook-timestamp` may be from now, either way, in whole seconds. Default 300. */
  toleranceSeconds?: number;
  /** Milliseconds since the epoch. Default Date.now. */
  now?: () => number;
}

const SECRET_PREFIX = 'whsec_';
/** Standard base64 with its padding: what a secret encodes its key with. */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const WHOLE_SECONDS = /^[0-9]{1,15}$/;
const DEFAULT_TOLERANCE_SECONDS = 300;

/** The HMAC keys of the secrets; never says what a secret holds, only which one is wrong. */
function signingKeys(secrets: string | readonly string[]): Buffer[] {
  const list = typeof secrets === 'string' ? [secrets] : secrets;
  if (list.length === 0) throw new WebhookVerificationError('bad_secret', 'no webhook secret was given');
  return list.map((secret, index) => {
    const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
    if (encoded === '' || !BASE64.test(encoded)) {
      const which = list.length === 1 ? 'the webhook secret' : `webhook secret ${index + 1} of ${list.length}`;
      throw new WebhookVerificationError('bad_secret', `${which} is not whsec_ followed by base64`);
    }
    return Buffer.from(encoded, 'base64');
  });
}

const isHeaders = (headers: WebhookHeaders): headers is Headers => typeof (headers as { get?: unknown }).get === 'function';

/** One header's value; repeated headers joined as fetch's Headers joins them. */
function header(headers: WebhookHeaders, name: string): string | undefined {
  if (isHeaders(headers)) return headers.get(name) ?? undefined;
  for (const [key, value] of Object.entries(headers)) {
    if (value === undefined || key.toLowerCase() !== name) continue;
    return typeof value === 'string' ? value : value.join(', ');
  }
  return undefined;
}

/** The `v1` signatures of the header; other versions are skipped, as the standard says. */
function v1Signatures(value: string): Buffer[] {
  const found: Buffer[] = [];
  for (const entry of value.split(/\s+/)) {
    const comma = entry.indexOf(',');
    if (comma === -1 || entry.slice(0, comma) !== 'v1') continue;
    // A trailing comma is left by a receiver that joined repeated headers with ", ".
    found.push(Buffer.from(entry.slice(comma + 1).replace(/,$/, ''), 'latin1'));
  }
  return found;
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

function parseEvent(rawBody: string | Uint8Array): GatewayEvent {
  let value: unknown;
  try {
    value = JSON.parse(typeof rawBody === 'string' ? rawBody : new TextDecoder('utf-8', { fatal: true }).decode(rawBody));
  } catch {
    throw new WebhookVerificationError('malformed_body', 'the body is not UTF-8 JSON');
  }
  if (
    !isObject(value) ||
    typeof value['id'] !== 'string' ||
    typeof value['type'] !== 'string' ||
    typeof value['createdAt'] !== 'string' ||
    typeof value['issuingAccount'] !== 'string' ||
    !Number.isSafeInteger(value['sequence']) ||
    !isObject(value['data'])
  ) {
    throw new WebhookVerificationError('malformed_body', 'the body is not an event: id, type, createdAt, issuingAccount, sequence and data are required');
  }
  // A type this version does not list yet passes as it is: a newer gateway may send one.
  return value as unknown as GatewayEvent;
}

/**
 * Checks a webhook delivery and returns its event. `rawBody` must be the body exactly as
 * received (the bytes, or their text): a body parsed and serialised again no longer matches its
 * signature. Any of `secrets` may have signed it (during a rotation, give the new and the old).
 * Throws WebhookVerificationError, whose `reason` says which check failed; the checks run in
 * the order of WebhookVerificationReason, so a bad secret is reported whatever the request.
 * Comparisons take the same time wherever the signatures differ.
 */
export function verifyEvent(
  secrets: string | readonly string[],
  headers: WebhookHeaders,
  rawBody: string | Uint8Array,
  options: VerifyEventOptions = {},
): GatewayEvent {
  const toleranceSeconds = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  if (!Number.isFinite(toleranceSeconds) || toleranceSeconds < 0) throw new TypeError('toleranceSeconds must be a finite number of seconds, 0 or more');
  const keys = signingKeys(secrets);

  const id = header(headers, 'webhook-id') ?? '';
  const timestamp = header(headers, 'webhook-timestamp') ?? '';
  const signature = header(headers, 'webhook-signature') ?? '';
  const absent = Object.entries({ 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signature }).filter(([, value]) => value === '');
  if (absent.length > 0) throw new WebhookVerificationError('missing_headers', `missing ${absent.map(([name]) => name).join(', ')}`);
  if (!WHOLE_SECONDS.test(timestamp)) throw new WebhookVerificationError('missing_headers', 'webhook-timestamp is not a whole number of seconds');

  const nowSeconds = Math.floor((options.now ?? Date.now)() / 1000);
  const skew = nowSeconds - Number(timestamp);
  if (Math.abs(skew) > toleranceSeconds) {
    const direction = skew > 0 ? `${skew} s in the past` : `${-skew} s in the future`;
    throw new WebhookVerificationError('timestamp_outside_tolerance', `webhook-timestamp is ${direction} (tolerance ${toleranceSeconds} s)`);
  }

  const given = v1Signatures(signature);
  const matches = keys.some((key) => {
    const expected = Buffer.from(createHmac('sha256', key).update(`${id}.${timestamp}.`).update(rawBody).digest('base64'), 'latin1');
    return given.some((candidate) => candidate.length === expected.length && timingSafeEqual(candidate, expected));
  });
  if (!matches) {
    throw new WebhookVerificationError(
      'bad_signature',
      given.length === 0
        ? 'webhook-signature holds no v1 signature'
        : `no v1 signature matches ${keys.length === 1 ? 'the secret' : `any of the ${keys.length} secrets`}`,
    );
  }
  return parseEvent(rawBody);
}
