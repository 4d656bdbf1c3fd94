import { readFileSync } from 'node:fs';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { RETRYABLE_STATUSES, type CallOptions, type CardGatewayClient, type WebhookVerificationReason } from '../src/index.js';

/**
 * What the client's README and doc comments promise about retries and call options is what the
 * code does: the statuses login retries are RETRYABLE_STATUSES, and every method that talks to
 * the gateway takes `{ deadlineMs?, signal? }`.
 */

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const clientSource = readFileSync(new URL('../src/client.ts', import.meta.url), 'utf8');
const receiveEvents = readFileSync(new URL('../examples/receive-events.ts', import.meta.url), 'utf8');

/** The HTTP statuses a text names, sorted. */
const statusesIn = (text: string): number[] => [...text.matchAll(/\b[1-5]\d\d\b/g)].map((match) => Number(match[0])).sort((a, b) => a - b);

const retryable = [...RETRYABLE_STATUSES].sort((a, b) => a - b);

describe('the client documentation matches the code', () => {
  it("the README's methods table names exactly the retryable statuses for login", () => {
    const row = readme.split('\n').find((line) => line.startsWith('| `login('));
    expect(row).toBeDefined();
    expect(statusesIn(row!)).toEqual(retryable);
  });

  it("login's doc comment names exactly the retryable statuses", () => {
    const comment = /\/\*\*((?:(?!\*\/)[\s\S])*)\*\/\s*async login\(/.exec(clientSource)?.[1];
    expect(comment).toBeDefined();
    expect(statusesIn(comment!)).toEqual(retryable);
  });

  it('the README says which methods take { deadlineMs?, signal? }, and they do', () => {
    const sentence = readme.split('\n').find((line) => line.includes('`{ deadlineMs?, signal? }`'));
    expect(sentence).toBeDefined();
    for (const method of [
      'login',
      'createCard',
      'accessToken',
      'refresh',
      'logout',
      'getCard',
      'listCardsPage',
      'listCards',
      'freezeCard',
      'unfreezeCard',
      'cancelCard',
    ])
      expect(sentence).toContain(`\`${method}\``);
    expect(sentence).not.toMatch(/[Ee]very method/);
    // Checked by `npm run typecheck`.
    expectTypeOf<Parameters<CardGatewayClient['login']>[2]>().toEqualTypeOf<CallOptions | undefined>();
    expectTypeOf<Parameters<CardGatewayClient['accessToken']>[0]>().toEqualTypeOf<CallOptions | undefined>();
    expectTypeOf<Parameters<CardGatewayClient['refresh']>[0]>().toEqualTypeOf<CallOptions | undefined>();
    expectTypeOf<Parameters<CardGatewayClient['logout']>[0]>().toEqualTypeOf<CallOptions | undefined>();
    expectTypeOf<NonNullable<Parameters<CardGatewayClient['createCard']>[1]>>().toExtend<CallOptions>();
    expectTypeOf<NonNullable<Parameters<CardGatewayClient['getCard']>[1]>>().toExtend<CallOptions>();
    expectTypeOf<Parameters<CardGatewayClient['listCardsPage']>[1]>().toEqualTypeOf<CallOptions | undefined>();
    expectTypeOf<Parameters<CardGatewayClient['listCards']>[1]>().toEqualTypeOf<CallOptions | undefined>();
    expectTypeOf<Parameters<CardGatewayClient['freezeCard']>[2]>().toEqualTypeOf<CallOptions | undefined>();
    expectTypeOf<Parameters<CardGatewayClient['unfreezeCard']>[2]>().toEqualTypeOf<CallOptions | undefined>();
    expectTypeOf<Parameters<CardGatewayClient['cancelCard']>[2]>().toEqualTypeOf<CallOptions | undefined>();
  });

  it('the "Receiving events" program is examples/receive-events.ts verbatim (type-checked by `npm run typecheck`)', () => {
    const program = /## Receiving events[\s\S]*?```ts\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(program).toBeDefined();
    expect(program).toBe(receiveEvents);
  });

  it('the "Receiving events" section names every reason verifyEvent refuses with', () => {
    const section = readme.slice(readme.indexOf('## Receiving events'), readme.indexOf('```ts', readme.indexOf('## Receiving events')));
    const reasons: Record<WebhookVerificationReason, true> = {
      bad_secret: true,
      missing_headers: true,
      timestamp_outside_tolerance: true,
      bad_signature: true,
      malformed_body: true,
    };
    for (const reason of Object.keys(reasons)) expect(section).toContain(`\`${reason}\``);
  });
});
