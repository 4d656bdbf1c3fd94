import { createHmac, randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { Webhook, WebhookVerificationError as StandardWebhooksError } from 'standardwebhooks';
import { describe, expect, expectTypeOf, it, vi } from 'vitest';
import { signWebhook, webhookKey } from '../../src/events/delivery/webhook-signature.js';
import { verifyEvent, WebhookVerificationError, type CardStatus, type GatewayEvent, type WebhookVerificationReason } from '../src/index.js';

/**
 * verifyEvent against the published Standard Webhooks library (`standardwebhooks`) and the
 * gateway's own signer (src/events/delivery/webhook-signature.ts): what either signs verifies
 * here, what the gateway signs verifies there, both draw the tolerance line at the same second,
 * and a property holds the two verifiers to the same verdicts. Then every way a delivery is
 * refused, each next to the one change that makes it pass.
 */

const T0_SECONDS = Date.UTC(2026, 10, 29, 9, 0, 0) / 1000;
const T0 = T0_SECONDS * 1000;
const at = (seconds: number) => () => T0 + seconds * 1000;

const newSecret = (): string => `whsec_${randomBytes(24).toString('base64')}`;

/** The scheme (D65) written out with node:crypto, for a body of any bytes: base64 HMAC-SHA256, keyed with the secret's decoded bytes, of `<id>.<timestamp>.<body>`. */
function formulaSignature(secret: string, id: string, timestamp: number, body: string | Uint8Array): string {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest('base64')}`;
}

const EVENT = {
  id: 'evt_01JDQ3ZV8K6Q2N7M4R5T8W9XYZ',
  type: 'card.status_changed',
  createdAt: '2026-11-29T09:00:00.123Z',
  issuingAccount: 'acct_demo',
  sequence: 42,
  data: {
    card: {
      cardId: 'card_3f0c9a',
      pan: '************4242',
      cvc: '***',
      expMonth: 11,
      expYear: 2029,
      status: 'inactive',
      requestedCardLimit: 10_000,
      cardLimit: 10_500,
      currency: 'EUR',
      createdAt: '2026-11-28T17:12:03.000Z',
      requestId: '0b8e2d3c-5f4a-4c1e-9a7b-2f6d8e1c3a5b',
      metadata: { card_name: 'Trip to Lisbon' },
    },
    previousStatus: 'active',
    status: 'inactive',
    reason: 'Card details shared by mistake',
    source: 'processor',
  },
} as const satisfies GatewayEvent;
/** As the gateway sends it: members in order, no whitespace. */
const BODY = JSON.stringify(EVENT);

/** The headers the gateway's deliveries carry, made by its own signer, with every one of `secrets`. */
function delivery(secrets: readonly string[], body: string = BODY, timestamp = T0_SECONDS) {
  return { ...signWebhook(secrets.map(webhookKey), EVENT.id, timestamp, body) };
}

/** The reason verifyEvent refuses with, or 'accepted'. */
function outcome(...args: Parameters<typeof verifyEvent>): WebhookVerificationReason | 'accepted' {
  try {
    verifyEvent(...args);
    return 'accepted';
  } catch (error) {
    if (error instanceof WebhookVerificationError) return error.reason;
    throw error;
  }
}

/** standardwebhooks reads Date.now(): it runs at `seconds` after T0, on a faked Date only while it runs. */
function standardVerify(secret: string, headers: Record<string, string>, body: string, seconds = 0): unknown {
  vi.useFakeTimers({ toFake: ['Date'], now: at(seconds)() });
  try {
    return new Webhook(secret).verify(body, headers);
  } finally {
    vi.useRealTimers();
  }
}

const standardOutcome = (...args: Parameters<typeof standardVerify>): string => {
  try {
    standardVerify(...args);
    return 'accepted';
  } catch (error) {
    if (error instanceof StandardWebhooksError) return 'refused';
    throw error;
  }
};

describe('verifyEvent and the standardwebhooks package agree', () => {
  it("verifies what standardwebhooks' Webhook.sign signed, and returns the event", () => {
    const secret = newSecret();
    const signature = new Webhook(secret).sign(EVENT.id, new Date(T0), BODY);
    // The same formula: the gateway's signature is byte for byte the library's.
    expect(signature).toBe(delivery([secret])['webhook-signature']);
    expect(signature).toBe(formulaSignature(secret, EVENT.id, T0_SECONDS, BODY));
    const headers = { 'webhook-id': EVENT.id, 'webhook-timestamp': String(T0_SECONDS), 'webhook-signature': signature };
    expect(verifyEvent(secret, headers, BODY, { now: at(0) })).toEqual(EVENT);
    // The raw bytes as node:http delivers them, and fetch's Headers.
    expect(verifyEvent(secret, new Headers(headers), Buffer.from(BODY), { now: at(0) })).toEqual(EVENT);
    expect(verifyEvent(secret, new Headers(headers), new TextEncoder().encode(BODY), { now: at(0) })).toEqual(EVENT);
  });

  it("passes the signature of the specification's example (its body is no event: malformed_body comes after the signature check)", () => {
    const headers = {
      'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
      'webhook-timestamp': '1614265330',
      'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
    };
    const now = () => 1614265330_000;
    expect(outcome('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', headers, '{"test": 2432232314}', { now })).toBe('malformed_body');
    expect(outcome('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', headers, '{"test": 2432232315}', { now })).toBe('bad_signature');
  });

  it("what the gateway's signer signed passes standardwebhooks' verify, a wrong secret fails both", () => {
    const secret = newSecret();
    const headers = delivery([secret]);
    expect(standardVerify(secret, headers, BODY)).toEqual(EVENT);
    expect(verifyEvent(secret, headers, BODY, { now: at(0) })).toEqual(EVENT);
    const other = newSecret();
    expect(standardOutcome(other, headers, BODY)).toBe('refused');
    expect(outcome(other, headers, BODY, { now: at(0) })).toBe('bad_signature');
  });

  it('accepts a timestamp exactly 300 s away and refuses one 301 s away, in the past and in the future, as standardwebhooks does', () => {
    const secret = newSecret();
    const headers = delivery([secret]);
    for (const [seconds, expected] of [
      [300, 'accepted'],
      [301, 'timestamp_outside_tolerance'],
      [-300, 'accepted'],
      [-301, 'timestamp_outside_tolerance'],
    ] as const) {
      expect(outcome(secret, headers, BODY, { now: at(seconds) }), `now = T0 ${seconds} s`).toBe(expected);
      expect(standardOutcome(secret, headers, BODY, seconds), `standardwebhooks, now = T0 ${seconds} s`).toBe(expected === 'accepted' ? 'accepted' : 'refused');
    }
    // Whole seconds, as the header: 300.999 s is still second 300.
    expect(outcome(secret, headers, BODY, { now: () => T0 + 300_999 })).toBe('accepted');
    expect(outcome(secret, headers, BODY, { now: () => T0 + 301_000 })).toBe('timestamp_outside_tolerance');
  });

  it('takes any of several signatures and any of several secrets (rotation), in standardwebhooks too', () => {
    const [old, current, unrelated] = [newSecret(), newSecret(), newSecret()];
    // The gateway signs with every secret of the endpoint; the receiver knows only the new one.
    const rotated = delivery([old, current]);
    expect(rotated['webhook-signature'].split(' ')).toHaveLength(2);
    expect(verifyEvent(current, rotated, BODY, { now: at(0) })).toEqual(EVENT);
    expect(standardVerify(current, rotated, BODY)).toEqual(EVENT);
    // The receiver holds two secrets, the second one matches.
    expect(verifyEvent([unrelated, current], delivery([current]), BODY, { now: at(0) })).toEqual(EVENT);
    expect(outcome([unrelated, newSecret()], rotated, BODY, { now: at(0) })).toBe('bad_signature');
  });
});

describe('property: verifyEvent gives the verdicts of standardwebhooks', () => {
  const HEADER_NAMES = ['webhook-id', 'webhook-timestamp', 'webhook-signature'] as const;
  const receiver = newSecret();
  const others = [newSecret(), newSecret()];

  it('for any event, signer, extra signatures, clock skew around the tolerance, tampering and missing header, both accept or both refuse', () => {
    fc.assert(
      fc.property(
        fc.record({
          id: fc.stringMatching(/^evt_[0-9A-Z]{26}$/),
          sequence: fc.nat(),
          reason: fc.string({ maxLength: 40 }),
          signers: fc.shuffledSubarray([receiver, ...others]),
          // The boundary itself often, not once in 600 draws.
          skewSeconds: fc.oneof(fc.constantFrom(-301, -300, 300, 301), fc.integer({ min: -310, max: 310 })),
          tamper: fc.boolean(),
          dropped: fc.option(fc.constantFrom(...HEADER_NAMES)),
        }),
        ({ id, sequence, reason, signers, skewSeconds, tamper, dropped }) => {
          const body = JSON.stringify({ ...EVENT, id, sequence, data: { ...EVENT.data, reason } });
          const headers: Record<string, string> = { ...signWebhook(signers.map(webhookKey), id, T0_SECONDS, body) };
          if (dropped !== null) delete headers[dropped];
          const received = tamper ? body.replace(`"sequence":${sequence}`, `"sequence":${sequence + 1}`) : body;
          const ours = outcome(receiver, headers, received, { now: at(skewSeconds) });
          const theirs = standardOutcome(receiver, headers, received, skewSeconds);
          expect(ours === 'accepted' ? 'accepted' : 'refused').toBe(theirs);
          if (ours === 'accepted') expect(verifyEvent(receiver, headers, received, { now: at(skewSeconds) })).toEqual(JSON.parse(received));
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('verifyEvent refuses', () => {
  const secret = newSecret();
  const headers = delivery([secret]);
  const now = at(0);

  it('a body changed after signing, even one re-serialised to the same JSON value', () => {
    expect(outcome(secret, headers, BODY, { now })).toBe('accepted');
    expect(outcome(secret, headers, BODY.replace('"sequence":42', '"sequence":43'), { now })).toBe('bad_signature');
    expect(outcome(secret, headers, JSON.stringify(EVENT, null, 2), { now })).toBe('bad_signature');
    expect(standardOutcome(secret, headers, BODY.replace('"sequence":42', '"sequence":43'))).toBe('refused');
  });

  it('a signature moved to another id or another timestamp within the tolerance', () => {
    expect(outcome(secret, { ...headers, 'webhook-id': `${EVENT.id}0` }, BODY, { now })).toBe('bad_signature');
    expect(outcome(secret, { ...headers, 'webhook-timestamp': String(T0_SECONDS + 1) }, BODY, { now })).toBe('bad_signature');
  });

  it('a request without one of the three headers, or with an empty one, and says which', () => {
    expect(
      outcome(
        secret,
        { 'Webhook-Id': headers['webhook-id'], 'WEBHOOK-TIMESTAMP': headers['webhook-timestamp'], 'webhook-Signature': headers['webhook-signature'] },
        BODY,
        { now },
      ),
    ).toBe('accepted');
    for (const name of ['webhook-id', 'webhook-timestamp', 'webhook-signature'] as const) {
      const { [name]: _dropped, ...rest } = headers;
      expect(() => verifyEvent(secret, rest, BODY, { now })).toThrow(new WebhookVerificationError('missing_headers', `missing ${name}`));
      expect(outcome(secret, { ...headers, [name]: '' }, BODY, { now }), name).toBe('missing_headers');
      expect(outcome(secret, { ...headers, [name]: undefined }, BODY, { now }), name).toBe('missing_headers');
    }
    expect(() => verifyEvent(secret, {}, BODY, { now })).toThrow('missing webhook-id, webhook-timestamp, webhook-signature');
  });

  it('a timestamp that is not whole seconds (milliseconds would be 1000 times too far)', () => {
    for (const timestamp of [`${T0_SECONDS}.5`, `${T0_SECONDS}abc`, `-${T0_SECONDS}`, '']) {
      expect(outcome(secret, { ...headers, 'webhook-timestamp': timestamp }, BODY, { now }), timestamp).toBe('missing_headers');
    }
    expect(outcome(secret, delivery([secret], BODY, T0), BODY, { now })).toBe('timestamp_outside_tolerance');
  });

  it('signatures of another length or version without throwing anything else (timingSafeEqual gets equal lengths only)', () => {
    const valid = headers['webhook-signature'];
    expect(outcome(secret, { ...headers, 'webhook-signature': 'v1,AAAA' }, BODY, { now })).toBe('bad_signature');
    expect(outcome(secret, { ...headers, 'webhook-signature': `${valid}A` }, BODY, { now })).toBe('bad_signature');
    expect(outcome(secret, { ...headers, 'webhook-signature': valid.replace('v1,', 'v1a,') }, BODY, { now })).toBe('bad_signature');
    expect(() => verifyEvent(secret, { ...headers, 'webhook-signature': 'v1a,AAAA v2' }, BODY, { now })).toThrow('webhook-signature holds no v1 signature');
    // Repeated headers joined by a Headers object (", ") still verify.
    const repeated = new Headers({ 'webhook-id': headers['webhook-id'], 'webhook-timestamp': headers['webhook-timestamp'] });
    repeated.append('webhook-signature', formulaSignature(newSecret(), EVENT.id, T0_SECONDS, BODY));
    repeated.append('webhook-signature', valid);
    expect(outcome(secret, repeated, BODY, { now })).toBe('accepted');
  });

  it('a secret that is not whsec_ and base64, before looking at the request, without quoting it', () => {
    for (const bad of ['whsec_', 'whsec_not base64!', 'whsec_abc', `whsec_${'A'.repeat(31)}=x`]) {
      let thrown: unknown;
      try {
        verifyEvent(bad, {}, '');
      } catch (error) {
        thrown = error;
      }
      expect(thrown, bad).toBeInstanceOf(WebhookVerificationError);
      expect((thrown as WebhookVerificationError).reason, bad).toBe('bad_secret');
      if (bad !== 'whsec_') expect((thrown as WebhookVerificationError).message, bad).not.toContain(bad.slice('whsec_'.length));
    }
    expect(() => verifyEvent([secret, 'whsec_?'], headers, BODY, { now })).toThrow(
      new WebhookVerificationError('bad_secret', 'webhook secret 2 of 2 is not whsec_ followed by base64'),
    );
    expect(outcome([], headers, BODY, { now })).toBe('bad_secret');
    // The prefix is optional, as in standardwebhooks.
    expect(outcome(secret.slice('whsec_'.length), headers, BODY, { now })).toBe('accepted');
  });

  it('a correctly signed body that is not an event', () => {
    const signedBody = (body: string | Buffer) =>
      outcome(secret, { ...headers, 'webhook-signature': formulaSignature(secret, EVENT.id, T0_SECONDS, body) }, body, { now });
    expect(signedBody(BODY)).toBe('accepted');
    expect(signedBody('not json')).toBe('malformed_body');
    expect(signedBody('[]')).toBe('malformed_body');
    expect(signedBody(JSON.stringify({ ...EVENT, sequence: '42' }))).toBe('malformed_body');
    expect(signedBody(JSON.stringify({ ...EVENT, data: null }))).toBe('malformed_body');
    const { createdAt: _createdAt, ...withoutCreatedAt } = EVENT;
    expect(signedBody(JSON.stringify(withoutCreatedAt))).toBe('malformed_body');
    // Not UTF-8 (a lone continuation byte inside a string).
    const notUtf8 = Buffer.from(BODY);
    notUtf8[BODY.indexOf('mistake')] = 0x80;
    expect(signedBody(notUtf8)).toBe('malformed_body');
  });

  it('a negative or non-finite tolerance as a programming mistake (TypeError), and takes 0 as "this second only"', () => {
    expect(() => verifyEvent(secret, headers, BODY, { now, toleranceSeconds: -1 })).toThrow(TypeError);
    expect(() => verifyEvent(secret, headers, BODY, { now, toleranceSeconds: Number.NaN })).toThrow(TypeError);
    expect(outcome(secret, headers, BODY, { now: () => T0 + 999, toleranceSeconds: 0 })).toBe('accepted');
    expect(outcome(secret, headers, BODY, { now: at(1), toleranceSeconds: 0 })).toBe('timestamp_outside_tolerance');
  });
});

describe('the event verifyEvent returns', () => {
  it('narrows its data by type', () => {
    const secret = newSecret();
    const event = verifyEvent(secret, delivery([secret]), BODY, { now: at(0) });
    // Type-checked: each branch reads members only its type has.
    const summary = (known: GatewayEvent): string => {
      switch (known.type) {
        case 'card.created':
          return known.data.card.status;
        case 'card.status_changed':
          expectTypeOf(known.data.previousStatus).toEqualTypeOf<CardStatus>();
          return `${known.data.previousStatus}->${known.data.status} ${known.data.card.pan}`;
        default:
          return `${known.data.amount} ${known.data.currency} ${known.data.merchant.name}`;
      }
    };
    expect(summary(event)).toBe('active->inactive ************4242');
  });

  it('passes a type this version does not list (a newer gateway), for the receiver to acknowledge', () => {
    const secret = newSecret();
    const body = JSON.stringify({ ...EVENT, type: 'card.renewed' });
    expect(verifyEvent(secret, delivery([secret], body), body, { now: at(0) }).type).toBe('card.renewed');
  });
});
