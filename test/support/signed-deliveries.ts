import { Webhook } from 'standardwebhooks';
import type { ReceivedRequest } from './webhook-receiver.js';

/** A webhook request a partner would accept: its signature checked, its body read. */
export interface VerifiedDelivery {
  /** `webhook-id`: the event id, the same on every attempt. */
  readonly id: string;
  readonly body: string;
  readonly event: { readonly id: string; readonly type: string; readonly sequence: number; readonly data: Record<string, unknown> };
  readonly request: ReceivedRequest;
}

/** A request no partner would accept: a wait ends at once on it (`stopOn: isUnverified`) rather than hang. */
export class UnverifiedDelivery extends Error {}

export const isUnverified = (error: unknown): boolean => error instanceof UnverifiedDelivery;

const header = (request: ReceivedRequest, name: string): string => {
  const value = request.headers[name];
  if (typeof value !== 'string' || value === '') throw new UnverifiedDelivery(`webhook request without ${name}`);
  return value;
};

/**
 * Checks one webhook request as a partner's receiver would, with the standardwebhooks package
 * (not the gateway's signing module): one of the `webhook-signature` entries is the signature of
 * `<webhook-id>.<webhook-timestamp>.<body>` with `secret`, and the body is the event `webhook-id`
 * names. The timestamp is the one sent, not compared with this machine's clock: tests drive
 * the gateway's clock. Throws an UnverifiedDelivery naming what is wrong.
 */
export function verifyDelivery(request: ReceivedRequest, secret: string): VerifiedDelivery {
  const id = header(request, 'webhook-id');
  const timestamp = header(request, 'webhook-timestamp');
  if (!/^\d+$/.test(timestamp)) throw new UnverifiedDelivery(`webhook-timestamp is not integer seconds: ${timestamp}`);
  const expected = new Webhook(secret).sign(id, new Date(Number(timestamp) * 1000), request.body);
  const sent = header(request, 'webhook-signature').split(' ');
  if (!sent.includes(expected)) throw new UnverifiedDelivery(`webhook ${id}: no signature matches the secret (${sent.length} sent)`);
  const event = JSON.parse(request.body) as VerifiedDelivery['event'];
  if (event.id !== id) throw new UnverifiedDelivery(`webhook-id ${id} names another event than the body's ${event.id}`);
  return { id, body: request.body, event, request };
}

/** Every request verified (a failure throws), grouped by event id, in arrival order. */
export function deliveriesByEvent(requests: readonly ReceivedRequest[], secret: string): Map<string, VerifiedDelivery[]> {
  const byEvent = new Map<string, VerifiedDelivery[]>();
  for (const request of requests) {
    const delivery = verifyDelivery(request, secret);
    byEvent.set(delivery.id, [...(byEvent.get(delivery.id) ?? []), delivery]);
  }
  return byEvent;
}

/** A `whsec_` secret of 32 random-looking bytes, fixed so a failure can be reproduced. */
export const TEST_WEBHOOK_SECRET = 'whsec_' + Buffer.from('events-replicas-and-failover-0123', 'utf8').toString('base64');
