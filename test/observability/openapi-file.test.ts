import { afterAll, describe, expect, it } from 'vitest';
import { createTestGateway, type TestGateway } from '../support/gateway-fixture.js';
import { readCommittedDocument } from '../support/openapi-responses.js';

describe('docs/openapi.json', () => {
  let gw: TestGateway | undefined;
  afterAll(async () => gw?.close());

  it('is exactly what the route schemas generate, as the admin listener serves it (regenerate with `npm run openapi`)', async () => {
    gw = await createTestGateway();
    const served = await gw.gateway.admin.inject({ method: 'GET', url: '/openapi.json' });
    expect(served.statusCode).toBe(200);
    expect(readCommittedDocument()).toEqual(served.json());
  });
});
