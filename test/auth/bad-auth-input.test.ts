import { createPrivateKey, createPublicKey, generateKeyPairSync, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { InjectOptions } from 'fastify';
import { SignJWT, UnsecuredJWT, exportJWK, importPKCS8, type CryptoKey, type JWTHeaderParameters, type KeyInput } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SECRET_FINGERPRINT_CLAIM } from '../../src/auth/token-service.js';
import { ManualClock } from '../../src/foundation/clock.js';
import { createTestGateway, login, testKeys, type TestGateway } from '../support/gateway-fixture.js';
import { LOGIN, LOGOUT, REFRESH, RELAXED_LIMITS, T0, T0_SECONDS, expectEnvelope, expectUnauthorized, postRefresh } from '../support/auth-requests.js';

const MALFORMED_HEADER = 'Authorization header must be "Bearer <token>"';
const INVALID = 'Access token is invalid';

/** Spec 5.3, 7, D1, D12, D14, D20: every malformed request gets the envelope and the right status. */
describe('bad input to the authentication endpoints', () => {
  let gw: TestGateway;
  let signingKey: CryptoKey;
  let publicPem: string;
  let session: Awaited<ReturnType<typeof login>>;

  beforeAll(async () => {
    gw = await createTestGateway({ clock: new ManualClock(T0), overrides: { rateLimits: RELAXED_LIMITS } });
    const keys = await testKeys();
    const pem = readFileSync(keys.signingKey, 'utf8');
    signingKey = await importPKCS8(pem, 'EdDSA');
    publicPem = createPublicKey(createPrivateKey(pem)).export({ type: 'spki', format: 'pem' }).toString();
    session = await login(gw);
  });

  afterAll(async () => {
    await gw.close();
  });

  const json = (url: string, payload: string, headers: Record<string, string> = {}): InjectOptions => ({
    method: 'POST',
    url,
    payload,
    headers: { 'content-type': 'application/json', ...headers },
  });

  describe('request bodies', () => {
    const loginCases: [string, unknown, { path: string; message: string }[]][] = [
      ['a missing password', { username: 'full' }, [{ path: 'password', message: 'is required' }]],
      [
        'both fields missing',
        {},
        [
          { path: 'username', message: 'is required' },
          { path: 'password', message: 'is required' },
        ],
      ],
      ['an extra field', { username: 'full', password: 'x', remember: true }, [{ path: 'remember', message: 'is not a known field' }]],
      [
        'wrongly typed fields',
        { username: 42, password: ['x'] },
        [
          { path: 'username', message: 'must be string' },
          { path: 'password', message: 'must be string' },
        ],
      ],
      ['an empty username', { username: '', password: 'x' }, [{ path: 'username', message: 'must NOT have fewer than 1 characters' }]],
      ['a JSON array', [1, 2], [{ path: '(body)', message: 'must be object' }]],
      ['JSON null', null, [{ path: '(body)', message: 'must be object' }]],
    ];
    for (const [name, body, fields] of loginCases) {
      it(`refuses a login with ${name}: 400 with details.fields`, async () => {
        const response = await gw.inject(json(LOGIN, JSON.stringify(body)));
        expectEnvelope(response, 400, 'Request validation failed', { fields });
        expect(response.json<{ details: { fields: unknown[] } }>().details.fields).toStrictEqual(fields);
      });
    }

    it('refuses refresh and logout bodies with missing, extra or wrongly typed fields: 400 with details.fields', async () => {
      const bearer = { authorization: `Bearer ${session.accessToken}` };
      for (const url of [REFRESH, LOGOUT]) {
        expectEnvelope(await gw.inject(json(url, '{}', bearer)), 400, 'Request validation failed', {
          fields: [{ path: 'refreshToken', message: 'is required' }],
        });
        const mixed = await gw.inject(json(url, JSON.stringify({ refreshToken: 5, extra: 'x' }), bearer));
        expectEnvelope(mixed, 400, 'Request validation failed');
        expect(mixed.json<{ details: { fields: unknown[] } }>().details.fields).toEqual(
          expect.arrayContaining([
            { path: 'refreshToken', message: 'must be string' },
            { path: 'extra', message: 'is not a known field' },
          ]),
        );
      }
    });

    it('refuses a non-JSON body with 415 and malformed JSON with 400', async () => {
      const text = await gw.inject({ method: 'POST', url: LOGIN, payload: 'username=full&password=x', headers: { 'content-type': 'text/plain' } });
      expectEnvelope(text, 415, 'Content-Type must be application/json');
      const form = await gw.inject({
        method: 'POST',
        url: LOGIN,
        payload: 'username=full&password=x',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      expectEnvelope(form, 415, 'Content-Type must be application/json');
      expectEnvelope(await gw.inject(json(LOGIN, '{"username": "full", "password":')), 400, 'Request body is not valid JSON');
      expectEnvelope(await gw.inject(json(LOGIN, "{'username': 'full'}")), 400, 'Request body is not valid JSON');
    });

    it('refuses an empty body with 400', async () => {
      expectEnvelope(await gw.inject(json(LOGIN, '')), 400, 'Request body is empty');
      expectEnvelope(await gw.inject({ method: 'POST', url: LOGIN }), 400, 'Request validation failed', {
        fields: [{ path: '(body)', message: 'must be object' }],
      });
    });

    it('refuses a body over the 16 KiB limit with 413', async () => {
      const response = await gw.inject(json(LOGIN, JSON.stringify({ username: 'full', password: 'x'.repeat(17 * 1024) })));
      expectEnvelope(response, 413, 'Request body is too large');
    });
  });

  describe('the Authorization header (D12)', () => {
    const refreshWith = (authorization: string | undefined, url = REFRESH) =>
      gw.inject({ method: 'POST', url, payload: { refreshToken: session.refreshToken }, headers: authorization === undefined ? {} : { authorization } });

    it('accepts the scheme in any case with exactly one space', async () => {
      expect((await refreshWith(`Bearer ${session.accessToken}`)).statusCode).toBe(200);
      expect((await refreshWith(`bearer ${session.accessToken}`)).statusCode).toBe(200);
      expect((await refreshWith(`BEARER ${session.accessToken}`)).statusCode).toBe(200);
    });

    it('refuses two spaces, a tab, another scheme, no scheme and a scheme without token with 401', async () => {
      for (const header of [
        `Bearer  ${session.accessToken}`,
        `Bearer\t${session.accessToken}`,
        'Basic ZnVsbDpjb3JyZWN0IGhvcnNlIGJhdHRlcnkgc3RhcGxl',
        `Token ${session.accessToken}`,
        session.accessToken,
        'Bearer',
        'Bearer ',
        `Bearer ${session.accessToken} ${session.accessToken}`,
      ]) {
        expectUnauthorized(await refreshWith(header), MALFORMED_HEADER);
      }
    });

    it('refuses a missing header with 401 on refresh and logout', async () => {
      expectUnauthorized(await refreshWith(undefined), 'Authorization header is missing');
      expectUnauthorized(await refreshWith(undefined, LOGOUT), 'Authorization header is missing');
    });

    it('refuses a token in the query string with 401, even with a valid header, and does nothing', async () => {
      const before = gw.audit.events().filter((event) => event.event === 'refresh.succeeded').length;
      for (const url of [
        `${REFRESH}?access_token=${session.accessToken}`,
        `${REFRESH}?token=${session.accessToken}`,
        `${LOGOUT}?refreshToken=${session.refreshToken}`,
      ]) {
        expectUnauthorized(await refreshWith(`Bearer ${session.accessToken}`, url), 'Tokens are not accepted in the URL');
      }
      expectUnauthorized(
        await gw.inject({ method: 'POST', url: `${REFRESH}?access_token=${session.accessToken}`, payload: { refreshToken: session.refreshToken } }),
        'Tokens are not accepted in the URL',
      );
      expect(gw.audit.events().filter((event) => event.event === 'refresh.succeeded')).toHaveLength(before);
    });
  });

  describe('forged and misused access tokens (D1, D2)', () => {
    interface Forgery {
      header?: Partial<JWTHeaderParameters> & Record<string, unknown>;
      claims?: Record<string, unknown>;
      key?: KeyInput;
    }

    /** A token like the gateway's own, signed with its real key unless told otherwise. */
    async function forge({ header = {}, claims = {}, key }: Forgery = {}): Promise<string> {
      const fullClaims: Record<string, unknown> = {
        sub: 'cred-full',
        iss: 'https://sandbox.test/',
        aud: 'card-issuing-sandbox',
        iat: T0_SECONDS,
        exp: T0_SECONDS + 3600,
        jti: randomUUID(),
        [SECRET_FINGERPRINT_CLAIM]: gw.config.credentials.byId('cred-full')?.secretFingerprint,
        ...claims,
      };
      for (const [name, value] of Object.entries(fullClaims)) if (value === undefined) delete fullClaims[name];
      const fullHeader = { alg: 'EdDSA', kid: 'sbx-1', typ: 'at+jwt', ...header } as JWTHeaderParameters;
      for (const [name, value] of Object.entries(fullHeader)) if (value === undefined) delete (fullHeader as Record<string, unknown>)[name];
      return new SignJWT(fullClaims).setProtectedHeader(fullHeader).sign(key ?? signingKey);
    }

    const bearing = async (token: string) => postRefresh(gw, token, session.refreshToken);

    it("accepts the harness's own well-formed token (so every refusal below is caused by its one change)", async () => {
      expect((await bearing(await forge())).statusCode).toBe(200);
    });

    it('refuses a token whose signature or payload was tampered with', async () => {
      const [head, payload, signature] = session.accessToken.split('.') as [string, string, string];
      const flipped = `${signature[0] === 'A' ? 'B' : 'A'}${signature.slice(1)}`;
      expectUnauthorized(await bearing(`${head}.${payload}.${flipped}`), INVALID);
      const otherPayload = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload, 'base64url').toString()), sub: 'cred-uk' })).toString('base64url');
      expectUnauthorized(await bearing(`${head}.${otherPayload}.${signature}`), INVALID);
    });

    it('refuses an unsigned alg:none token, with or without a signature segment', async () => {
      const unsigned = new UnsecuredJWT({
        sub: 'cred-full',
        iss: 'https://sandbox.test/',
        aud: 'card-issuing-sandbox',
        iat: T0_SECONDS,
        exp: T0_SECONDS + 3600,
        jti: randomUUID(),
      }).encode();
      expect(unsigned.endsWith('.')).toBe(true);
      expectUnauthorized(await bearing(unsigned), MALFORMED_HEADER);
      const withSignature = `${unsigned}${session.accessToken.split('.')[2]}`;
      expectUnauthorized(await bearing(withSignature), INVALID);
      const noneWithKid = `${Buffer.from(JSON.stringify({ alg: 'none', kid: 'sbx-1', typ: 'at+jwt' })).toString('base64url')}.${unsigned.split('.')[1]}.${session.accessToken.split('.')[2]}`;
      expectUnauthorized(await bearing(noneWithKid), INVALID);
    });

    it('refuses an HS256 token keyed with the public key bytes (algorithm confusion)', async () => {
      const token = await forge({ header: { alg: 'HS256' }, key: new TextEncoder().encode(publicPem) });
      expectUnauthorized(await bearing(token), INVALID);
    });

    it('refuses tokens that carry their own key (jwk, jku, x5u, x5c), even when signed with the real key', async () => {
      const realPublicJwk = await exportJWK(createPublicKey(publicPem));
      expectUnauthorized(await bearing(await forge({ header: { jwk: realPublicJwk } })), INVALID);
      expectUnauthorized(await bearing(await forge({ header: { jku: 'https://attacker.example/jwks.json' } })), INVALID);
      expectUnauthorized(await bearing(await forge({ header: { x5u: 'https://attacker.example/cert.pem' } })), INVALID);
      expectUnauthorized(await bearing(await forge({ header: { x5c: ['MIIB'] } })), INVALID);

      // the classic attack: the attacker's own key, with its public half embedded in the header
      const attacker = generateKeyPairSync('ed25519');
      const attackerJwk = await exportJWK(attacker.publicKey);
      expectUnauthorized(await bearing(await forge({ header: { jwk: attackerJwk }, key: attacker.privateKey })), INVALID);
      expectUnauthorized(await bearing(await forge({ header: { jwk: attackerJwk, kid: undefined }, key: attacker.privateKey })), INVALID);
    });

    it('refuses a wrong issuer, a wrong audience, a wrong or missing typ, a missing kid and missing claims', async () => {
      const refusals: Forgery[] = [
        { claims: { iss: 'https://production.test/' } },
        { claims: { aud: 'card-issuing-production' } },
        { claims: { aud: 'full' } },
        { header: { typ: 'JWT' } },
        { header: { typ: undefined } },
        { header: { kid: undefined } },
        { header: { kid: 'unknown-kid' } },
        { claims: { exp: undefined } },
        { claims: { sub: undefined } },
        { claims: { jti: undefined } },
        { claims: { iat: undefined } },
        { claims: { nbf: T0_SECONDS + 600 } },
      ];
      for (const forgery of refusals) {
        const response = await bearing(await forge(forgery));
        expect({ forgery, status: response.statusCode }).toEqual({ forgery, status: 401 });
        expectUnauthorized(response, INVALID);
      }
    });

    it('refuses an expired token, and a valid token of a credential that does not exist', async () => {
      expectUnauthorized(await bearing(await forge({ claims: { iat: T0_SECONDS - 3610, exp: T0_SECONDS - 10 } })), 'Access token is expired');
      expectUnauthorized(await bearing(await forge({ claims: { sub: 'cred-ghost' } })), INVALID);
    });

    it("refuses a token without the credential's secret fingerprint, or with another one, as revoked (D41)", async () => {
      const REVOKED = 'Access token is revoked: log in again';
      // what a token issued before D41 looks like, and one issued under an earlier password hash
      for (const fingerprint of [undefined, 'AAAAAAAAAAAAAAAAAAAAAA', 42]) {
        const response = await bearing(await forge({ claims: { [SECRET_FINGERPRINT_CLAIM]: fingerprint } }));
        expectUnauthorized(response, REVOKED);
        expect(response.json<{ code: string }>().code).toBe('token_revoked');
        expect(response.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
      }
    });

    it('refuses the ID token as a bearer token (D2)', async () => {
      expectUnauthorized(await bearing(session.idToken), INVALID);
    });

    it('refuses the refresh token as a bearer token', async () => {
      // `<family>.<generation>.<secret>` has a JWS's three parts, and is no JWS
      expectUnauthorized(await bearing(session.refreshToken), INVALID);
      // a token of the format before issue 35 (`<family>.<secret>`) is not even shaped like one
      const [family, , secret] = session.refreshToken.split('.');
      expectUnauthorized(await bearing(`${family}.${secret}`), MALFORMED_HEADER);
    });
  });
});
