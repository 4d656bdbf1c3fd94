import { createPrivateKey, createPublicKey, generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT, createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JWK } from 'jose';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { createTestGateway, login, productionSafeOverrides, testKeys, type RawConfig, type TestGateway } from '../support/gateway-fixture.js';
import { T0, T0_SECONDS, expectUnauthorized, getWhoami, postRefresh, refreshOk, whoamiRoute } from '../support/auth-requests.js';

/** D8 (environments apart), D1 (unknown keys refused), D24 (rotation and JWKS). */
describe('environment separation and signing keys', () => {
  let sandboxPublicKeyFile: string;
  let signingKeyFile: string;
  let otherSigningKeyFile: string;
  let productionShape: RawConfig = {};
  let otherPublicKeyFile: string;
  const opened: TestGateway[] = [];
  const stores: MemoryStore[] = [];

  beforeAll(async () => {
    const keys = await testKeys();
    signingKeyFile = keys.signingKey;
    otherSigningKeyFile = keys.otherSigningKey;
    otherPublicKeyFile = keys.otherPublicKey;
    productionShape = await productionSafeOverrides();
    // The public half of the sandbox signing key, as an operator would publish it for a rotation.
    const dir = mkdtempSync(join(tmpdir(), 'gw-auth-keys-'));
    sandboxPublicKeyFile = join(dir, 'sandbox-signing.pub');
    const publicPem = createPublicKey(createPrivateKey(readFileSync(signingKeyFile)))
      .export({ type: 'spki', format: 'pem' })
      .toString();
    writeFileSync(sandboxPublicKeyFile, publicPem, { mode: 0o600 });
  });

  afterEach(async () => {
    for (const gw of opened.splice(0)) await gw.close();
    for (const store of stores.splice(0)) await store.close();
  });

  const sandbox = (): RawConfig => ({});
  const production = (): RawConfig => ({
    ...productionShape,
    environment: 'production',
    tokens: {
      issuer: 'https://production.test/',
      audience: 'card-issuing-production',
      signingKey: { kid: 'prod-1', privateKey: { file: otherSigningKeyFile } },
    },
  });
  /** The sandbox after a key rotation: signs with the new key, still verifies the old one (or not). */
  const rotatedSandbox = (keepOldKey: boolean): RawConfig => ({
    tokens: {
      signingKey: { kid: 'sbx-2', privateKey: { file: otherSigningKeyFile } },
      verificationKeys: keepOldKey ? [{ kid: 'sbx-1', publicKey: { file: sandboxPublicKeyFile } }] : [],
    },
  });

  async function open(overrides: RawConfig, store?: MemoryStore): Promise<TestGateway> {
    const gw = await createTestGateway({ overrides, clock: new ManualClock(T0), extend: whoamiRoute, ...(store && { store }) });
    opened.push(gw);
    return gw;
  }

  it('refuses a sandbox token on production and a production token on the sandbox (D8)', async () => {
    const sbx = await open(sandbox());
    const prod = await open(production());
    const sbxSession = await login(sbx);
    const prodSession = await login(prod);
    expect(decodeProtectedHeader(prodSession.accessToken).kid).toBe('prod-1');

    expectUnauthorized(await getWhoami(prod, sbxSession.accessToken), 'Access token is invalid');
    expectUnauthorized(await postRefresh(prod, sbxSession.accessToken, sbxSession.refreshToken), 'Access token is invalid');
    expectUnauthorized(await getWhoami(sbx, prodSession.accessToken), 'Access token is invalid');
    expectUnauthorized(await postRefresh(sbx, prodSession.accessToken, prodSession.refreshToken), 'Access token is invalid');
    // each is accepted at home
    expect((await getWhoami(sbx, sbxSession.accessToken)).statusCode).toBe(200);
    expect((await getWhoami(prod, prodSession.accessToken)).statusCode).toBe(200);
  });

  it("keeps environments apart by issuer and audience even if one trusted the other's key", async () => {
    const sbx = await open(sandbox());
    // a misconfigured production that lists the sandbox key under the sandbox kid
    const prod = await open({
      ...production(),
      tokens: { ...(production()['tokens'] as RawConfig), verificationKeys: [{ kid: 'sbx-1', publicKey: { file: sandboxPublicKeyFile } }] },
    });
    const session = await login(sbx);
    expectUnauthorized(await getWhoami(prod, session.accessToken), 'Access token is invalid');
  });

  it('refuses a token signed by a key it does not list: retired kid, or a listed kid with another key', async () => {
    const original = await open(sandbox());
    const retired = await open(rotatedSandbox(false));
    const session = await login(original);
    expectUnauthorized(await getWhoami(retired, session.accessToken), 'Access token is invalid');

    // the right kid, issuer, audience and typ, but a key the gateway never had
    const stranger = generateKeyPairSync('ed25519').privateKey;
    const forged = await new SignJWT({})
      .setProtectedHeader({ alg: 'EdDSA', kid: 'sbx-1', typ: 'at+jwt' })
      .setSubject('cred-full')
      .setIssuer('https://sandbox.test/')
      .setAudience('card-issuing-sandbox')
      .setIssuedAt(T0_SECONDS)
      .setExpirationTime(T0_SECONDS + 3600)
      .setJti('forged')
      .sign(stranger);
    expectUnauthorized(await getWhoami(original, forged), 'Access token is invalid');
  });

  it('keeps accepting tokens of the previous key after a rotation that lists it, and its sessions keep refreshing', async () => {
    const store = new MemoryStore();
    stores.push(store);
    const before = await open(sandbox(), store);
    const after = await open(rotatedSandbox(true), store);
    const old = await login(before);

    expect((await getWhoami(after, old.accessToken)).json()).toEqual({ credential: 'cred-full' });
    const rotated = await refreshOk(after, old.accessToken, old.refreshToken);
    expect(decodeProtectedHeader(rotated.accessToken).kid).toBe('sbx-2');
    expect((await getWhoami(after, rotated.accessToken)).statusCode).toBe(200);
    // the instance not yet rotated does not know the new key
    expectUnauthorized(await getWhoami(before, rotated.accessToken), 'Access token is invalid');
  });

  it('publishes the current and the still-valid keys in /.well-known/jwks.json, public parts only (D24)', async () => {
    const before = await open(sandbox());
    const after = await open(rotatedSandbox(true));
    const oldSession = await login(before);
    const newSession = await login(after);

    const response = await after.inject({ method: 'GET', url: '/.well-known/jwks.json' });
    expect(response.statusCode).toBe(200);
    const jwks = response.json<{ keys: JWK[] }>();
    expect(jwks.keys.map((key) => key.kid)).toEqual(['sbx-2', 'sbx-1']);
    for (const key of jwks.keys) {
      expect(key).toMatchObject({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig' });
      expect(key.d).toBeUndefined();
    }
    const newPublic = createPublicKey(readFileSync(otherPublicKeyFile)).export({ format: 'jwk' });
    expect(jwks.keys[0]?.x).toBe(newPublic.x);

    // integrators verify ID tokens of both keys offline with it
    const keySet = createLocalJWKSet(jwks);
    const options = { issuer: 'https://sandbox.test/', audience: 'full', currentDate: new Date(T0) };
    await expect(jwtVerify(oldSession.idToken, keySet, options)).resolves.toMatchObject({ payload: { sub: 'cred-full' } });
    await expect(jwtVerify(newSession.idToken, keySet, options)).resolves.toMatchObject({ payload: { sub: 'cred-full' } });

    const beforeKeys = (await before.inject({ method: 'GET', url: '/.well-known/jwks.json' })).json<{ keys: JWK[] }>();
    expect(beforeKeys.keys.map((key) => key.kid)).toEqual(['sbx-1']);
  });
});
