import type { ServerResponse } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { createWebhookSender, type WebhookSender } from '../../src/events/delivery/webhook-sender.js';
import { startWebhookReceiver, type ReceiverAnswer, type WebhookReceiver } from '../support/webhook-receiver.js';
import { waitFor, withinHangGuard } from '../support/wait.js';

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const OLD_SECRET = 'whsec_c2VjcmV0IG9mIHRoZSB3ZWVrIGJlZm9yZSwgcm90YXRlZA==';
const JSON_TEXT =
  '{"id":"evt_01JD0000000000000000000000","type":"card.created","createdAt":"2026-11-29T09:00:00.123Z","issuingAccount":"acct_demo","sequence":42,"data":{"card":{"cardId":"card_1","note":"naïve ✓"}}}';
const EVENT = { id: 'evt_01JD0000000000000000000000', json: JSON_TEXT };

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const item of open.splice(0).reverse()) await item.close();
});

async function receiver(answer: ReceiverAnswer = 200): Promise<WebhookReceiver> {
  const started = await startWebhookReceiver(answer);
  open.push(started);
  return started;
}

function sender(): WebhookSender {
  const made = createWebhookSender({ guarded: false });
  open.push(made);
  return made;
}

const target = (url: string, timeoutMs = 10_000) => ({ url, secrets: [SECRET, OLD_SECRET], timeoutMs });

/** An answer whose body never ends: 16 KiB at a time, as fast as the connection takes it, until it closes. */
const endless =
  (status: number) =>
  (response: ServerResponse): void => {
    response.writeHead(status, { 'content-type': 'text/plain' });
    const chunk = Buffer.alloc(16 * 1024, 'x');
    const write = (): void => {
      while (!response.destroyed && response.write(chunk));
      if (!response.destroyed) response.once('drain', write);
    };
    write();
  };

describe('the webhook sender (D65)', () => {
  it('POSTs the stored JSON byte for byte with Standard Webhooks headers a receiver verifies with every secret', async () => {
    const hooks = await receiver(200);
    const now = Date.now();
    const result = await sender().send(target(`${hooks.url}?token=abc`), EVENT, now);
    expect(result).toEqual({ outcome: 'delivered', status: 200 });
    const [request] = hooks.requests;
    expect(request?.method).toBe('POST');
    expect(request?.url).toBe('/hooks/gateway?token=abc');
    expect(request?.body).toBe(JSON_TEXT);
    expect(request?.headers['content-type']).toBe('application/json');
    expect(request?.headers['webhook-id']).toBe(EVENT.id);
    expect(request?.headers['webhook-timestamp']).toBe(String(Math.floor(now / 1000)));
    const headers = request!.headers as Record<string, string>;
    for (const secret of [SECRET, OLD_SECRET]) expect(new Webhook(secret).verify(request!.body, headers)).toEqual(JSON.parse(JSON_TEXT));
  });

  it('counts every 2xx as delivered, 410 as gone, and anything else as an error in a few words, never the body', async () => {
    const hooks = await receiver();
    const send = sender();
    const cases: [ReceiverAnswer, unknown][] = [
      [200, { outcome: 'delivered', status: 200 }],
      [202, { outcome: 'delivered', status: 202 }],
      [299, { outcome: 'delivered', status: 299 }],
      [410, { outcome: 'gone' }],
      [400, { outcome: 'error', error: 'status 400' }],
      [404, { outcome: 'error', error: 'status 404' }],
      [
        { status: 500, body: 'stack trace with a secret in it' },
        { outcome: 'error', error: 'status 500' },
      ],
      [503, { outcome: 'error', error: 'status 503' }],
      [199 + 1 + 100, { outcome: 'error', error: 'redirect 300' }],
    ];
    for (const [answer, expected] of cases) {
      hooks.answer(answer);
      expect(await send.send(target(hooks.url), EVENT, Date.now()), JSON.stringify(answer)).toEqual(expected);
    }
  });

  it('follows no redirect: a 3xx is an error to retry, and its Location is never asked', async () => {
    const elsewhere = await receiver(200);
    const hooks = await receiver();
    const send = sender();
    for (const status of [301, 302, 303, 307, 308]) {
      hooks.answer({ status, headers: { location: elsewhere.url } });
      expect(await send.send(target(hooks.url), EVENT, Date.now())).toEqual({ outcome: 'error', error: `redirect ${status}` });
    }
    expect(hooks.requests).toHaveLength(5);
    expect(elsewhere.connections()).toBe(0);
  });

  it('gives up at timeoutMs on an endpoint that does not answer, and drops its connection', async () => {
    const hooks = await receiver('hold');
    const result = await sender().send(target(hooks.url, 300), EVENT, Date.now());
    expect(result).toEqual({ outcome: 'error', error: 'timeout' });
    expect(hooks.held()).toBe(1);
    await waitFor('the held connection closed by the sender', () => hooks.isClosed(hooks.requests[0]!.connection));
  });

  it('reads at most 4 KiB of an answer: an endless body is dropped and the connection with it, long before the deadline', async () => {
    const hooks = await receiver(endless(200));
    // The deadline is far beyond the hang guard: only the 4 KiB limit lets the send settle.
    const sent = sender().send(target(hooks.url, 600_000), EVENT, Date.now());
    expect(await withinHangGuard('a send to an endless answer', sent, 60_000)).toEqual({ outcome: 'delivered', status: 200 });
    await waitFor('the endless answer cut off by the sender', () => hooks.isClosed(hooks.requests[0]!.connection));
    hooks.answer(endless(500));
    expect(await withinHangGuard('a send to an endless 500', sender().send(target(hooks.url, 600_000), EVENT, Date.now()), 60_000)).toEqual({
      outcome: 'error',
      error: 'status 500',
    });
  });

  it('counts a status that arrived in time, whatever its body does after the deadline', async () => {
    const hooks = await receiver((response) => {
      response.writeHead(202, { 'content-type': 'text/plain' });
      response.write('partial');
    });
    expect(await sender().send(target(hooks.url, 300), EVENT, Date.now())).toEqual({ outcome: 'delivered', status: 202 });
    await waitFor('the unfinished answer dropped by the sender', () => hooks.isClosed(hooks.requests[0]!.connection));
  });

  it('names a closed port `connection refused` and an unknown name `name not resolved`', async () => {
    const hooks = await receiver();
    const url = hooks.url;
    await hooks.close();
    open.splice(open.indexOf(hooks), 1);
    expect(await sender().send(target(url), EVENT, Date.now())).toEqual({ outcome: 'error', error: 'connection refused' });
    expect(await sender().send(target('http://no-such-host.invalid/hooks'), EVENT, Date.now())).toEqual({ outcome: 'error', error: 'name not resolved' });
  });
});
