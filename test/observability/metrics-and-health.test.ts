import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSandboxConnector, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { listenGateway, type RunningGateway } from '../../src/server.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import type { GatewayStore } from '../../src/store/store-types.js';
import { createTestGateway, PASSWORD, testCertificatePem, type TestGateway } from '../support/gateway-fixture.js';
import { unusedPort } from '../support/redis.js';
import { realRequest } from '../transport/real-clients.js';
import { waitFor } from '../support/wait.js';

/** D22: the admin listener serves Prometheus metrics, liveness and readiness; the API does not. */

class UnreachableStore extends MemoryStore {
  override async ping(): Promise<void> {
    throw new Error('store is down');
  }
}

const LOGIN_200 = 'gateway_http_requests_total{method="POST",route="/api/v1/auth/login",status_code="200"}';

describe('admin listener: metrics, health and readiness', () => {
  const opened: { gw: TestGateway; running: RunningGateway; store?: GatewayStore }[] = [];
  let connector: RunningSandboxConnector;
  beforeAll(async () => {
    connector = await startSandboxConnector({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await connector.close();
  });
  afterEach(async () => {
    for (const { gw, running, store } of opened.splice(0)) {
      await running.close();
      await gw.close();
      await store?.close();
    }
  });

  /** A gateway whose connector is the running sandbox, unless `connectorUrl` says otherwise. */
  async function start(store?: GatewayStore, connectorUrl = connector.url) {
    const gw = await createTestGateway({ overrides: { connector: { url: connectorUrl, timeoutMs: 30_000 } }, ...(store && { store }) });
    const running = await listenGateway(gw.gateway, {
      https: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
    });
    opened.push({ gw, running, ...(store && { store }) });
    const ca = await testCertificatePem();
    return {
      gw,
      running,
      api: (path: string, options: Parameters<typeof realRequest>[1] = {}) => realRequest(`${running.httpsUrl}${path}`, { ca, ...options }),
      admin: (path: string) => realRequest(`${running.adminUrl}${path}`),
    };
  }

  it('exposes Prometheus text with the default process metrics', async () => {
    const { admin } = await start();
    const response = await admin('/metrics');
    expect(response.status).toBe(200);
    expect(response.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(response.body).toContain('# TYPE process_cpu_user_seconds_total counter');
    expect(response.body).toMatch(/^process_cpu_user_seconds_total \d/m);
    expect(response.body).toMatch(/^nodejs_eventloop_lag_seconds /m);
    expect(response.body).toContain('# TYPE gateway_http_requests_total counter');
  });

  it('counts a request by method, route template and status after it is answered', async () => {
    const { api, admin } = await start();
    expect((await admin('/metrics')).body).not.toContain(LOGIN_200);
    const login = await api('/api/v1/auth/login', { method: 'POST', body: JSON.stringify({ username: 'full', password: PASSWORD }) });
    expect(login.status).toBe(200);
    const metrics = await waitFor('the login to be counted', async () => {
      const body = (await admin('/metrics')).body;
      return body.includes(LOGIN_200) ? body : undefined;
    });
    expect(metrics).toContain(`${LOGIN_200} 1\n`);
    expect(metrics).toContain('# TYPE gateway_http_request_duration_seconds histogram');
    expect(metrics).toMatch(/^gateway_http_request_duration_seconds_count\{method="POST",route="\/api\/v1\/auth\/login",status_code="200"\} 1$/m);
    expect(metrics).toMatch(/^gateway_http_request_duration_seconds_bucket\{le="\+Inf",method="POST",route="\/api\/v1\/auth\/login",status_code="200"\} 1$/m);
    expect(metrics).toMatch(/^gateway_logins_total\{outcome="succeeded"\} 1$/m);
    await api('/api/v1/auth/login', { method: 'POST', body: JSON.stringify({ username: 'full', password: PASSWORD }) });
    await waitFor('the second login to be counted', async () => ((await admin('/metrics')).body.includes(`${LOGIN_200} 2\n`) ? true : undefined));
  });

  it('labels unknown paths "unmatched", never with the raw path; a wrong method on a known path with its route template', async () => {
    const { api, admin } = await start();
    expect((await api('/no/such/thing/4111111111111111')).status).toBe(404);
    expect((await api('/api/v1/auth/login')).status).toBe(405);
    expect((await api('/api/v1/issuing/cards/4111111111111111', { method: 'DELETE' })).status).toBe(405);
    const metrics = await waitFor('the 404 and the 405s to be counted', async () => {
      const body = (await admin('/metrics')).body;
      return body.includes('method="DELETE"') && body.includes('status_code="405"') && body.includes('status_code="404"') ? body : undefined;
    });
    expect(metrics).toMatch(/^gateway_http_requests_total\{method="GET",route="unmatched",status_code="404"\} 1$/m);
    expect(metrics).toMatch(/^gateway_http_requests_total\{method="GET",route="\/api\/v1\/auth\/login",status_code="405"\} 1$/m);
    expect(metrics).toMatch(/^gateway_http_requests_total\{method="DELETE",route="\/api\/v1\/issuing\/cards\/:cardId",status_code="405"\} 1$/m);
    expect(metrics).not.toMatch(/route="unmatched",status_code="405"/);
    expect(metrics).not.toContain('/no/such/thing');
    expect(metrics).not.toContain('4111111111111111');
  });

  it('answers /healthz with 200', async () => {
    const { admin } = await start();
    const response = await admin('/healthz');
    expect(response.status).toBe(200);
    expect(JSON.parse(response.body)).toEqual({ status: 'ok' });
  });

  it('answers /readyz with 200 while the store and the connector answer', async () => {
    const { admin } = await start();
    const response = await admin('/readyz');
    expect(response.status).toBe(200);
    expect(JSON.parse(response.body)).toEqual({ status: 'ready', checks: { store: 'ok', connector: 'ok', audit: 'ok' } });
  });

  it('answers /readyz with 503 when the connector does not answer', async () => {
    const { admin } = await start(undefined, `http://127.0.0.1:${await unusedPort()}`);
    const response = await admin('/readyz');
    expect(response.status).toBe(503);
    expect(JSON.parse(response.body)).toEqual({ status: 'not ready', checks: { store: 'ok', connector: 'unavailable', audit: 'ok' } });
  });

  it('answers /readyz with 503 when the store ping fails, and /healthz stays 200', async () => {
    const { admin } = await start(new UnreachableStore());
    const response = await admin('/readyz');
    expect(response.status).toBe(503);
    expect(JSON.parse(response.body)).toEqual({ status: 'not ready', checks: { store: 'unavailable', connector: 'ok', audit: 'ok' } });
    expect(response.body).not.toContain('store is down');
    expect((await admin('/healthz')).status).toBe(200);
  });

  it('keeps the listeners apart: no metrics on the API, no API on the admin listener', async () => {
    const { api, admin } = await start();
    const onApi = await api('/metrics');
    expect(onApi.status).toBe(404);
    expect(JSON.parse(onApi.body)).toMatchObject({ status: 404, message: 'Resource not found' });
    expect((await admin('/.well-known/jwks.json')).status).toBe(404);
  });
});
