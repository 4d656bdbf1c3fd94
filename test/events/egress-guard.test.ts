import type { LookupFunction } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { egressGuarded, guardedLookup, isRefusedAddress } from '../../src/events/delivery/egress-guard.js';
import { createWebhookSender, type WebhookSender } from '../../src/events/delivery/webhook-sender.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const EVENT = { id: 'evt_01JD0000000000000000000000', json: '{"id":"evt_01JD0000000000000000000000"}' };

/** A resolver standing in for DNS: answers each name with the addresses the test gives it. */
function resolverOf(names: Record<string, { address: string; family: number }[]>): LookupFunction & { asked: string[] } {
  const asked: string[] = [];
  const resolve = ((hostname, options, callback) => {
    asked.push(hostname);
    const found = names[hostname];
    if (found === undefined) return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), []);
    if (options.all) return callback(null, found);
    return callback(null, found[0]!.address, found[0]!.family);
  }) as LookupFunction & { asked: string[] };
  resolve.asked = asked;
  return resolve;
}

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const item of open.splice(0).reverse()) await item.close();
});

async function receiver(): Promise<WebhookReceiver> {
  const started = await startWebhookReceiver(204);
  open.push(started);
  return started;
}

function sender(guarded: boolean, resolve?: LookupFunction): WebhookSender {
  const made = createWebhookSender({ guarded, ...(resolve && { resolve }) });
  open.push(made);
  return made;
}

const target = (url: string) => ({ url, secrets: [SECRET], timeoutMs: 10_000 });

describe('the egress guard (D65)', () => {
  it('refuses loopback, private, link-local, unique-local and unspecified addresses, at their edges, and nothing public', () => {
    const refused = [
      '127.0.0.1',
      '127.255.255.255',
      '0.0.0.0',
      '10.0.0.0',
      '10.255.255.255',
      '172.16.0.0',
      '172.31.255.255',
      '192.168.0.1',
      '169.254.169.254',
      '100.64.0.1',
      '::1',
      '::',
      'fe80::1',
      'fc00::1',
      'fdff:ffff::1',
      '::ffff:127.0.0.1',
      '::ffff:10.1.2.3',
      'not an address',
    ];
    const allowed = [
      '11.0.0.0',
      '9.255.255.255',
      '172.15.255.255',
      '172.32.0.0',
      '192.169.0.1',
      '169.253.255.255',
      '8.8.8.8',
      '2606:4700:4700::1111',
      '::ffff:8.8.8.8',
    ];
    for (const address of refused) expect(isRefusedAddress(address), address).toBe(true);
    for (const address of allowed) expect(isRefusedAddress(address), address).toBe(false);
  });

  it('guards production only, and not with allowPrivateNetworks', () => {
    expect(egressGuarded('production', false)).toBe(true);
    expect(egressGuarded('production', true)).toBe(false);
    expect(egressGuarded('sandbox', false)).toBe(false);
    expect(egressGuarded('local', false)).toBe(false);
  });

  it('refuses a loopback endpoint when guarded: no connection is opened', async () => {
    const hooks = await receiver();
    expect(await sender(true).send(target(hooks.url), EVENT, Date.now())).toEqual({ outcome: 'refused', error: 'address refused by egress guard' });
    const mapped = hooks.url.replace('127.0.0.1', '[::ffff:127.0.0.1]');
    expect(await sender(true).send(target(mapped), EVENT, Date.now())).toEqual({ outcome: 'refused', error: 'address refused by egress guard' });
    expect(hooks.connections()).toBe(0);
  });

  it('delivers to the same loopback endpoint when not guarded (allowPrivateNetworks, sandbox, local)', async () => {
    const hooks = await receiver();
    expect(await sender(false).send(target(hooks.url), EVENT, Date.now())).toEqual({ outcome: 'delivered', status: 204 });
    expect(hooks.requests).toHaveLength(1);
  });

  it('checks the address a name resolves to when it connects: a name answering 127.0.0.1 is refused, and delivered to unguarded', async () => {
    const hooks = await receiver();
    const named = hooks.url.replace('127.0.0.1', 'hooks.partner.example');
    const dns = resolverOf({ 'hooks.partner.example': [{ address: '127.0.0.1', family: 4 }] });
    expect(await sender(true, dns).send(target(named), EVENT, Date.now())).toEqual({ outcome: 'refused', error: 'address refused by egress guard' });
    expect(dns.asked).toEqual(['hooks.partner.example']);
    expect(hooks.connections()).toBe(0);
    // The system resolver's localhost too.
    expect((await sender(true).send(target(hooks.url.replace('127.0.0.1', 'localhost')), EVENT, Date.now())).outcome).toBe('refused');
    expect(hooks.connections()).toBe(0);

    expect(await sender(false, dns).send(target(named), EVENT, Date.now())).toEqual({ outcome: 'delivered', status: 204 });
    expect(hooks.requests[0]?.headers.host).toBe(new URL(named).host);
  });

  it('resolves at every connection, not once: a name that turns to loopback later is refused then', async () => {
    const hooks = await receiver();
    const names: Record<string, { address: string; family: number }[]> = { 'hooks.partner.example': [{ address: '8.8.8.8', family: 4 }] };
    const dns = resolverOf(names);
    const lookup = guardedLookup(dns);
    const first = await new Promise<unknown>((resolve) => lookup('hooks.partner.example', { all: true }, (error, found) => resolve(error ?? found)));
    expect(first).toEqual([{ address: '8.8.8.8', family: 4 }]);
    names['hooks.partner.example'] = [{ address: '127.0.0.1', family: 4 }];
    const named = hooks.url.replace('127.0.0.1', 'hooks.partner.example');
    expect((await sender(true, dns).send(target(named), EVENT, Date.now())).outcome).toBe('refused');
    expect(hooks.connections()).toBe(0);
  });

  it('keeps only the allowed addresses of a mixed answer, and refuses when none is left', async () => {
    const lookup = guardedLookup(
      resolverOf({
        mixed: [
          { address: '127.0.0.1', family: 4 },
          { address: '8.8.4.4', family: 4 },
          { address: 'fd00::1', family: 6 },
        ],
        inside: [
          { address: '10.0.0.1', family: 4 },
          { address: '::1', family: 6 },
        ],
      }),
    );
    const ask = (name: string, all: boolean) =>
      new Promise<unknown>((resolve) => lookup(name, { all }, (error, found, family) => resolve(error ? (error as { code?: string }).code : [found, family])));
    expect(await ask('mixed', true)).toEqual([[{ address: '8.8.4.4', family: 4 }], undefined]);
    expect(await ask('mixed', false)).toEqual(['8.8.4.4', 4]);
    expect(await ask('inside', true)).toBe('EGRESS_REFUSED');
    expect(await ask('unknown', true)).toBe('ENOTFOUND');
  });
});
