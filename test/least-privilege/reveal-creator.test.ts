import { afterEach, describe, expect, it } from 'vitest';
import { RELAXED_LIMITS } from '../support/auth-requests.js';
import { connectorStats, createCard, expectCard, startCardFixture, validCardBody, type CardFixture } from '../support/card-fixture.js';
import { DEFAULT_CREDENTIALS, PASSWORD, createTestGateway, login, type TestCredential } from '../support/gateway-fixture.js';
import { startSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { auditRecords, expectContractError } from './contract-helpers.js';

/**
 * Issue 9 row 4 (D28): an idempotency record remembers the credential that created the card. A
 * replay with revealDetails=true by another credential of the same issuing account, even one
 * holding cards:reveal, is 403 permission_denied, audited (access.denied reason
 * reveal_not_creator), and reveals nothing; its masked replay stays 201.
 */

const NOT_CREATOR = 'Only the credential that created this card can reveal its details';
const PAN_LIKE = /\d{13,19}/;

/** Two reveal-capable credentials in one issuing account, plus the defaults. */
const TWO_REVEALERS: TestCredential[] = [
  ...DEFAULT_CREDENTIALS,
  { id: 'cred-full-2', username: 'full-2', password: PASSWORD, issuingAccount: 'acct-eu', permissions: ['cards:create', 'cards:reveal'] },
];

describe('reveal belongs to the creator (D28)', () => {
  const opened: CardFixture[] = [];
  afterEach(async () => {
    for (const fixture of opened.splice(0)) await fixture.close();
  });

  async function fixture(credentials?: TestCredential[]): Promise<CardFixture> {
    if (!credentials) {
      const started = await startCardFixture();
      opened.push(started);
      return started;
    }
    // startCardFixture has no credentials option: the same wiring with this credential set.
    const connector = await startSandboxConnector({ host: '127.0.0.1', port: 0, controls: true });
    const gw = await createTestGateway({ credentials, overrides: { rateLimits: RELAXED_LIMITS, connector: { url: connector.url, timeoutMs: 30_000 } } });
    const started: CardFixture = {
      gw,
      connector,
      token: async (username = 'full') => (await login(gw, username)).accessToken,
      close: async () => {
        await gw.close();
        await connector.close();
      },
    };
    opened.push(started);
    return started;
  }

  it("refuses a reveal replay of create-only A's card by B (cards:reveal, same account) with 403, audited, nothing revealed; B's masked replay is 201", async () => {
    const f = await fixture();
    const [tokenA, tokenB] = [await f.token('create-only'), await f.token('full')];
    const body = validCardBody();
    const created = expectCard(await createCard(f.gw, tokenA, body));
    const before = await connectorStats(f.connector);

    const refused = await createCard(f.gw, tokenB, body, 'revealDetails=true');
    expect(refused.statusCode, refused.body).toBe(403);
    expect(refused.body).not.toMatch(PAN_LIKE);
    expect(refused.body).not.toContain(created.cardId);
    const envelope = expectContractError(refused, 403, 'permission_denied', NOT_CREATOR);
    expect(envelope.details).toEqual({});
    const records = auditRecords(f.gw).filter((record) => record['correlationId'] === envelope.correlationId);
    expect(records).toContainEqual(
      expect.objectContaining({
        event: 'access.denied',
        outcome: 'denied',
        reason: 'reveal_not_creator',
        credential: 'cred-full',
        requestId: body['requestId'],
      }),
    );
    expect(records.filter((record) => record['event'] === 'card.revealed')).toEqual([]);

    const masked = await createCard(f.gw, tokenB, body);
    const replay = expectCard(masked);
    expect(replay.cardId).toBe(created.cardId);
    expect(replay.pan).toBe(created.pan);
    expect(replay.pan).toMatch(/^\*{12}\d{4}$/);
    expect(replay.cvc).toMatch(/^\*+$/);
    expect(masked.headers['idempotent-replayed']).toBe('true');
    expect((await connectorStats(f.connector)).requestsReceived).toBe(before.requestsReceived);
  });

  it('refuses the reveal replay between two reveal-capable credentials; the creator itself may still reveal', async () => {
    const f = await fixture(TWO_REVEALERS);
    const [tokenA, tokenB] = [await f.token('full'), await f.token('full-2')];
    const body = validCardBody();
    // A creates it with the details revealed, so the test knows the PAN to look for.
    const revealedToA = expectCard(await createCard(f.gw, tokenA, body, 'revealDetails=true'));
    expect(revealedToA.pan).toMatch(/^\d{16}$/);

    const refused = await createCard(f.gw, tokenB, body, 'revealDetails=true');
    expect(refused.statusCode, refused.body).toBe(403);
    expect(refused.body).not.toContain(revealedToA.pan);
    expect(refused.body).not.toMatch(PAN_LIKE);
    const envelope = expectContractError(refused, 403, 'permission_denied', NOT_CREATOR);
    expect(auditRecords(f.gw).filter((record) => record['correlationId'] === envelope.correlationId)).toContainEqual(
      expect.objectContaining({
        event: 'access.denied',
        outcome: 'denied',
        reason: 'reveal_not_creator',
        credential: 'cred-full-2',
        requestId: body['requestId'],
      }),
    );

    // B's masked replay: the same card, masked.
    const masked = expectCard(await createCard(f.gw, tokenB, body));
    expect(masked.cardId).toBe(revealedToA.cardId);
    expect(masked.pan).toBe(`${'*'.repeat(12)}${revealedToA.pan.slice(-4)}`);
    // The creator's own reveal replay still works.
    const again = expectCard(await createCard(f.gw, tokenA, body, 'revealDetails=true'));
    expect(again.pan).toBe(revealedToA.pan);
    expect(again.cvc).toBe(revealedToA.cvc);
  });
  it('refuses every reveal of a card the connector replays after the gateway lost its record; the masked replay is 201', async () => {
    const f = await fixture(TWO_REVEALERS);
    const body = validCardBody();
    const created = expectCard(await createCard(f.gw, await f.token('full'), body, 'revealDetails=true'));

    // Past the record's 24 h (a failover or a restarted memory store loses it the same way): the
    // connector still knows the Idempotency-Key and replays A's card to whoever asks next.
    f.gw.clock.advance(24 * 3600 * 1000 + 1000);
    const refused = await createCard(f.gw, await f.token('full-2'), body, 'revealDetails=true');
    expectContractError(refused, 403, 'permission_denied', NOT_CREATOR);
    expect(refused.body).not.toContain(created.pan);
    expect(refused.body).not.toMatch(PAN_LIKE);

    // The record now kept names no creator: A cannot reveal it either, both get it masked.
    expectContractError(await createCard(f.gw, await f.token('full'), body, 'revealDetails=true'), 403, 'permission_denied', NOT_CREATOR);
    for (const username of ['full', 'full-2']) {
      const masked = expectCard(await createCard(f.gw, await f.token(username), body));
      expect(masked.cardId).toBe(created.cardId);
      expect(masked.pan).toBe(`${'*'.repeat(12)}${created.pan.slice(-4)}`);
    }
  });
});
