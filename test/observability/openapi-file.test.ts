import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { createTestGateway, type TestGateway } from '../support/gateway-fixture.js';

describe('docs/openapi.json', () => {
  let gw: TestGateway | undefined;
  afterAll(async () => gw?.close());

  it('matches what the route schemas generate (regenerate with `npm run openapi`)', async () => {
    gw = await createTestGateway();
    const generated = gw.gateway.app.swagger() as { openapi: string; paths: unknown; components: unknown };
    const committed = JSON.parse(readFileSync(new URL('../../docs/openapi.json', import.meta.url), 'utf8')) as typeof generated;
    expect(committed.openapi).toBe(generated.openapi);
    expect(committed.paths).toEqual(JSON.parse(JSON.stringify(generated.paths)));
    expect(committed.components).toEqual(JSON.parse(JSON.stringify(generated.components)));
  });
});
