import { setTimeout as delay } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { AbortedError, NetworkError, type CardGatewayClient } from '../src/index.js';
import { cardInput, PASSWORD, rejectionOf, startRealGateway, type RealGateway } from './support/real-gateway.js';

/**
 * Callers waiting for the shared single-flight refresh: each stops waiting at its own deadline
 * or signal while the refresh runs on for the others, and a signal that was aborted before the
 * call starts no refresh at all (nor leaves a rejection nobody handles).
 */

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('waiting for the shared refresh', () => {
  let g: RealGateway | undefined;
  afterEach(async () => {
    await g?.close();
    g = undefined;
  });

  /**
   * A client whose waits move the gateway clock by the whole delay but take a twentieth of it in
   * real time, so that a refresh retrying 503s (Retry-After 5 s) stays in flight for a while.
   * `onSleep` runs after each wait with the number of waits so far.
   */
  function slowClient(gateway: RealGateway, onSleep: (count: number) => void): CardGatewayClient {
    let count = 0;
    return gateway.client({
      sleep: async (ms) => {
        gateway.sleeps.push(ms);
        gateway.gw.clock.advance(ms);
        await delay(ms / 20);
        count += 1;
        onSleep(count);
      },
    });
  }

  it('createCard and accessToken stop waiting at their own deadline while the refresh retries 503s; the refresh runs on for the others', async () => {
    const gateway = await startRealGateway();
    g = gateway;
    // The audit trail cannot be written: refresh fails closed with 503 audit_unavailable
    // (Retry-After 5) until it is mended, after the refresh's second wait (10 s of gateway time).
    const client = slowClient(gateway, (count) => {
      if (count === 2) gateway.gw.audit.setWritable(true);
    });
    const session = await client.login('full', PASSWORD);
    gateway.gw.clock.set(session.accessTokenExpiresAt * 1000 - 200_000);
    gateway.gw.audit.setWritable(false);

    const settled: string[] = [];
    const cardRejection = rejectionOf(client.createCard(cardInput(), { deadlineMs: 200 }).finally(() => settled.push('createCard')));
    const tokenRejection = rejectionOf(client.accessToken({ deadlineMs: 100 }).finally(() => settled.push('accessToken')));
    const refreshed = client.refresh().finally(() => settled.push('refresh'));

    const cardError = await cardRejection;
    // It gave up while the shared refresh was still retrying, not after it.
    expect(settled).not.toContain('refresh');
    expect(cardError).toBeInstanceOf(NetworkError);
    expect(cardError).toMatchObject({ code: 'timeout', retryable: true, requestId: expect.stringMatching(UUID_V4) });
    expect((cardError as NetworkError).message).toMatch(/refresh/);
    const tokenError = await tokenRejection;
    expect(tokenError).toBeInstanceOf(NetworkError);
    expect(tokenError).toMatchObject({ code: 'timeout', retryable: true });
    // Both gave up while the shared refresh was still retrying.
    expect(settled.sort()).toEqual(['accessToken', 'createCard']);

    const tokens = await refreshed;
    expect(tokens.accessToken).not.toBe(session.accessToken);
    expect(client.session).toEqual(tokens);
    expect(gateway.auditEvents('refresh.succeeded')).toHaveLength(1);
    expect(gateway.retries.map((retry) => retry.operation)).toEqual(['refresh', 'refresh']);
    // No card request was sent: the deadline passed before there was a token to send it with.
    expect((await gateway.connectorStats()).requestsReceived).toBe(0);

    // The requestId finishes the job later, with the refreshed token.
    const finished = await client.createCard({ ...cardInput(), requestId: (cardError as NetworkError).requestId! });
    expect(finished).toMatchObject({ requestId: (cardError as NetworkError).requestId, replayed: false, attempts: 1 });
  });

  it('an already-aborted signal starts no refresh and leaves no unhandled rejection', async () => {
    g = await startRealGateway();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => {
      unhandled.push(reason);
    };
    process.on('unhandledRejection', onUnhandled);
    try {
      const client = g.client();
      const session = await client.login('full', PASSWORD);
      // Another process logs the session out: a refresh of it would now be refused (401).
      await g.client({ session }).logout();
      g.gw.clock.set(session.accessTokenExpiresAt * 1000 - 200_000);

      const aborted = AbortSignal.abort();
      await expect(client.refresh({ signal: aborted })).rejects.toBeInstanceOf(AbortedError);
      await expect(client.accessToken({ signal: aborted })).rejects.toBeInstanceOf(AbortedError);

      // Time for a refresh that was started all the same to fail.
      for (let i = 0; i < 100 && client.session !== undefined; i += 1) await delay(10);
      await delay(50);
      expect(unhandled).toEqual([]);
      expect(await g.metric('gateway_refreshes_total')).toBe(0);
      expect(client.session).toEqual(session);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
