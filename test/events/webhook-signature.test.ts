import { createHmac, randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { signatureOf, signWebhook, webhookKey } from '../../src/events/delivery/webhook-signature.js';

/** The example of the Standard Webhooks specification (and of its reference libraries' tests). */
const VECTOR = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
};

const EVENT =
  '{"id":"evt_01JD0000000000000000000000","type":"card.created","createdAt":"2026-11-29T09:00:00.123Z","issuingAccount":"acct_demo","sequence":42,"data":{"card":{"cardId":"card_1","maskedPan":"411111******1111","note":"café ✓"}}}';

/** The scheme written out again with node:crypto, without the module under test. */
const independently = (secret: string, id: string, timestamp: number, body: string): string =>
  `v1,${createHmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64'))
    .update(Buffer.from(`${id}.${timestamp}.${body}`, 'utf8'))
    .digest('base64')}`;

describe('Standard Webhooks signing (D65)', () => {
  it('signs the specification example to its published signature', () => {
    const headers = signWebhook([webhookKey(VECTOR.secret)], VECTOR.id, VECTOR.timestamp, VECTOR.body);
    expect(headers).toEqual({ 'webhook-id': VECTOR.id, 'webhook-timestamp': '1614265330', 'webhook-signature': VECTOR.signature });
    expect(independently(VECTOR.secret, VECTOR.id, VECTOR.timestamp, VECTOR.body)).toBe(VECTOR.signature);
  });

  it('agrees with node:crypto and with the standardwebhooks package on an event with non-ASCII text', () => {
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const timestamp = 1_795_000_000;
    const ours = signatureOf(webhookKey(secret), 'evt_01JD0000000000000000000000', timestamp, EVENT);
    expect(ours).toBe(independently(secret, 'evt_01JD0000000000000000000000', timestamp, EVENT));
    expect(ours).toBe(new Webhook(secret).sign('evt_01JD0000000000000000000000', new Date(timestamp * 1000), EVENT));
  });

  it('is verified by the standardwebhooks package with every secret it was signed with, and refused after a change of one byte', () => {
    const current = `whsec_${randomBytes(24).toString('base64')}`;
    const previous = `whsec_${randomBytes(32).toString('base64')}`;
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = signWebhook([webhookKey(current), webhookKey(previous)], 'evt_01JD0000000000000000000001', timestamp, EVENT);
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}= v1,[A-Za-z0-9+/]{43}=$/);
    for (const secret of [current, previous]) expect(new Webhook(secret).verify(EVENT, { ...headers })).toEqual(JSON.parse(EVENT));
    const other = `whsec_${randomBytes(32).toString('base64')}`;
    expect(() => new Webhook(other).verify(EVENT, { ...headers })).toThrow(/signature/i);
    expect(() => new Webhook(current).verify(EVENT.replace('"sequence":42', '"sequence":43'), { ...headers })).toThrow(/signature/i);
  });

  it('refuses a secret without the whsec_ prefix or with a body that is not base64, without repeating it', () => {
    expect(webhookKey('whsec_AAAA')).toEqual(Buffer.from([0, 0, 0]));
    for (const secret of ['MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'whsec_', 'whsec_not base64!', 'whsec_AAA', 'WHSEC_AAAA']) {
      expect(() => webhookKey(secret)).toThrow(TypeError);
      try {
        webhookKey(secret);
      } catch (error) {
        if (secret.length > 6) expect((error as Error).message).not.toContain(secret.slice(6));
      }
    }
  });

  it('refuses a timestamp that is not integer seconds', () => {
    const key = webhookKey(VECTOR.secret);
    expect(() => signWebhook([key], 'evt_x', 1614265330.5, '{}')).toThrow(TypeError);
    expect(signWebhook([key], 'evt_x', 1614265330, '{}')['webhook-timestamp']).toBe('1614265330');
  });
});
