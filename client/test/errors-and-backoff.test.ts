import { describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../src/foundation/errors.js';
import { ApiError, GATEWAY_ERROR_CODES, RETRYABLE_STATUSES, SessionEndedError } from '../src/index.js';
import { apiError, type Answer } from '../src/answer.js';
import { backoffDelayMs, retryAfterSeconds } from '../src/retry.js';

/** The parts of the retry policy that need no gateway: the code catalogue, backoff arithmetic, Retry-After. */

describe('client error catalogue and retry timing', () => {
  it("mirrors the gateway's error codes and statuses exactly", () => {
    expect(GATEWAY_ERROR_CODES).toEqual(ERROR_CODES);
  });

  it('treats exactly 409, 429, 502, 503 and 504 as retryable statuses, except a code the catalogue calls final (409 card_canceled)', () => {
    const answer = (status: number, code: string): Answer => ({
      status,
      headers: new Headers(),
      json: { code, message: 'm', correlationId: 'c', timestamp: 't', status },
      correlationId: 'c',
    });
    const retryableCodes = Object.entries(GATEWAY_ERROR_CODES)
      .filter(([code, status]) => apiError(answer(status, code), { operation: 'getCard', attempt: 1 }, 0).retryable)
      .map(([code]) => code)
      .sort();
    expect(apiError(answer(409, 'card_canceled'), { operation: 'cancelCard', attempt: 1 }, 0)).toMatchObject({ code: 'card_canceled', retryable: false });
    // A code this version does not know keeps its status's rule.
    expect(apiError(answer(409, 'some_new_code'), { operation: 'getCard', attempt: 1 }, 0).retryable).toBe(true);
    expect([409, 429, 502, 503, 504].every((status) => RETRYABLE_STATUSES.has(status)) && RETRYABLE_STATUSES.size === 5).toBe(true);
    expect(retryableCodes).toEqual([
      'audit_unavailable',
      'connector_invalid_answer',
      'connector_timeout',
      'connector_unavailable',
      'idempotency_in_progress',
      'rate_limited',
      'server_busy',
      'shutting_down',
      'store_unavailable',
    ]);
  });

  it('backs off exponentially with equal jitter, capped, and never waits less than Retry-After', () => {
    const options = { baseMs: 250, maxMs: 8_000 };
    expect(backoffDelayMs(1, undefined, options, () => 0)).toBe(125);
    expect(backoffDelayMs(1, undefined, options, () => 0.999)).toBe(249);
    expect(backoffDelayMs(3, undefined, options, () => 0)).toBe(500);
    expect(backoffDelayMs(20, undefined, options, () => 0.5)).toBe(6_000);
    expect(backoffDelayMs(1, 5, options, () => 0)).toBe(5_000);
    expect(backoffDelayMs(4, 5, options, () => 0.999)).toBe(5_249);
  });

  it('reads Retry-After as seconds or an HTTP date, else the envelope value', () => {
    const now = Date.UTC(2026, 10, 22, 12, 0, 0);
    expect(retryAfterSeconds('7', 3, now)).toBe(7);
    expect(retryAfterSeconds(new Date(now + 12_300).toUTCString(), undefined, now)).toBe(12);
    expect(retryAfterSeconds(new Date(now - 5_000).toUTCString(), undefined, now)).toBe(0);
    expect(retryAfterSeconds(null, 3, now)).toBe(3);
    expect(retryAfterSeconds('soon', 'later', now)).toBeUndefined();
  });

  it('explains why a session ended and keeps the 401 it came from', () => {
    const cause = new ApiError('Refresh token is revoked', { status: 401, code: 'refresh_token_revoked', correlationId: 'c-1', retryable: false });
    const ended = new SessionEndedError('refresh_rejected', cause);
    expect(ended).toMatchObject({
      code: 'session_ended',
      reason: 'refresh_rejected',
      gatewayCode: 'refresh_token_revoked',
      status: 401,
      correlationId: 'c-1',
      retryable: false,
    });
    expect(ended.message).toBe(
      'The session has ended: the gateway refused to refresh it: the refresh token family was revoked (a logout elsewhere, an old refresh token reused after its 60 s grace, or the credential deactivated or given a new password since the login) (refresh_token_revoked); log in again',
    );
    expect(ended.cause).toBe(cause);
    const copy = ended.withContext({ attempts: 3, requestId: 'r-1' });
    expect(copy).toBeInstanceOf(SessionEndedError);
    expect(copy).toMatchObject({ attempts: 3, requestId: 'r-1', reason: 'refresh_rejected', message: ended.message });
    expect(copy.cause).toBe(cause);
    expect(ended.attempts).toBe(1);
  });
});
