import type { LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import type { GatewayDependencies } from '../../src/app.js';
import { expectEnvelopeBasics, UUID } from './envelope.js';
import type { TestGateway } from './gateway-fixture.js';
import { metricSum } from './metrics.js';

/** Requests and assertions shared by the authentication suites (test/auth). */

export const LOGIN = '/api/v1/auth/login';
export const REFRESH = '/api/v1/auth/refresh';
export const LOGOUT = '/api/v1/auth/logout';
export const WHOAMI = '/test/whoami';

/** The gateway's default start instant, a whole minute, so rate-limit windows line up with it. */
export const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);
export const T0_SECONDS = T0 / 1000;
export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;

/**
 * A protected route added for the tests only: it proves an access token is (still) accepted by
 * the bearer guard without depending on the card routes.
 */
export const whoamiRoute: NonNullable<GatewayDependencies['extend']> = {
  protected: (scope) => {
    scope.get(WHOAMI, async (request) => ({ credential: request.principal?.credential.id }));
  },
};

export function postLogin(gw: TestGateway, username: string, password: string, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return gw.inject({ method: 'POST', url: LOGIN, payload: { username, password }, headers });
}

export function postRefresh(gw: TestGateway, accessToken: string, refreshToken: string, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return gw.inject({ method: 'POST', url: REFRESH, payload: { refreshToken }, headers: { authorization: `Bearer ${accessToken}`, ...headers } });
}

export function postLogout(gw: TestGateway, accessToken: string, refreshToken: string): Promise<LightMyRequestResponse> {
  return gw.inject({ method: 'POST', url: LOGOUT, payload: { refreshToken }, headers: { authorization: `Bearer ${accessToken}` } });
}

export function getWhoami(gw: TestGateway, accessToken: string, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return gw.inject({ method: 'GET', url: WHOAMI, headers: { authorization: `Bearer ${accessToken}`, ...headers } });
}

export interface RefreshAnswer {
  accessToken: string;
  accessTokenExpiresAt: number;
  refreshToken: string;
  refreshTokenExpiresAt: number;
}

/** Refreshes and insists on 200; returns the parsed body. */
export async function refreshOk(gw: TestGateway, accessToken: string, refreshToken: string): Promise<RefreshAnswer> {
  const response = await postRefresh(gw, accessToken, refreshToken);
  expect(response.statusCode, response.body).toBe(200);
  return response.json<RefreshAnswer>();
}

/** The D20 envelope with the exact status and message; `correlationId` is the response's X-Correlation-Id. */
export function expectEnvelope(
  response: LightMyRequestResponse,
  status: number,
  message: string,
  details: Record<string, unknown> = {},
): Record<string, unknown> {
  const body = expectEnvelopeBasics(response, status, message) as unknown as Record<string, unknown>;
  expect(body).toMatchObject({ details });
  expect(body['correlationId']).toMatch(UUID);
  expect(new Date(String(body['timestamp'])).toISOString()).toBe(body['timestamp']);
  return body;
}

/** 401 with the given message and `details: {}` (spec 7: empty object in authentication failures). */
export function expectUnauthorized(response: LightMyRequestResponse, message: string): void {
  const body = expectEnvelope(response, 401, message);
  expect(body['details']).toStrictEqual({});
  expect(body['retryAfter']).toBeUndefined();
}

/** 429 per spec 7 and D11: `retryAfter` whole seconds >= 1, the same in `Retry-After`. Returns retryAfter. */
export function expectRateLimited(response: LightMyRequestResponse): number {
  const body = expectEnvelope(response, 429, 'Rate limit exceeded, retry later');
  const retryAfter = body['retryAfter'];
  expect(Number.isInteger(retryAfter)).toBe(true);
  expect(retryAfter as number).toBeGreaterThanOrEqual(1);
  expect(response.headers['retry-after']).toBe(String(retryAfter));
  return retryAfter as number;
}

/** 503 per D23: envelope with retryAfter and Retry-After, never a 401 or 429. */
export function expectStoreUnavailable(response: LightMyRequestResponse): void {
  const body = expectEnvelope(response, 503, 'Service temporarily unavailable');
  expect(body['retryAfter']).toBe(1);
  expect(response.headers['retry-after']).toBe('1');
}

/** The RateLimit-* headers of D11 as numbers. */
export function rateLimitHeaders(response: LightMyRequestResponse): { limit: number; remaining: number; reset: number } {
  const read = (name: string) => {
    const value = response.headers[name];
    expect(typeof value, `${name} header`).toBe('string');
    return Number(value);
  };
  return { limit: read('ratelimit-limit'), remaining: read('ratelimit-remaining'), reset: read('ratelimit-reset') };
}

/** Rate limits high enough that a suite about something else never meets them. */
export const RELAXED_LIMITS = { login: { points: 1000, windowSeconds: 60 }, refresh: { points: 1000, windowSeconds: 60 } };

/**
 * One sample of a Prometheus metric from the gateway's admin `/metrics` page: the sum of the
 * series named `name` whose labels include `labels` (0 when none is there yet).
 */
export async function metricValue(gw: TestGateway, name: string, labels: Record<string, string> = {}): Promise<number> {
  const response = await gw.gateway.admin.inject({ method: 'GET', url: '/metrics' });
  expect(response.statusCode).toBe(200);
  return metricSum(response.body, name, labels) ?? 0;
}
