import { Type, type Static } from '@sinclair/typebox';
import { CardRecordKey, Listener, Millis, Port, PositiveInt, Secret, Window } from './schema-primitives.js';
import { EventsSchema } from './events-schema.js';
import { StoreSchema } from './store-schema.js';

export { SecretRefSchema, type SecretRef } from './schema-primitives.js';

export const ConfigFileSchema = Type.Object(
  {
    environment: Type.Union([Type.Literal('local'), Type.Literal('sandbox'), Type.Literal('production')], {
      description: 'the environment this process serves; one process serves one environment (D8), and production refuses unsafe settings (D32)',
    }),
    listeners: Type.Object(
      {
        https: Listener('the TLS API listener'),
        plainHttp: Type.Optional(
          Listener(
            'a plain-HTTP listener: it answers 403 "HTTPS is required" (D9) unless a trusted proxy reports `X-Forwarded-Proto: https` (TLS terminated at the proxy)',
          ),
        ),
        admin: Type.Object(
          {
            host: Type.String({
              minLength: 1,
              default: '127.0.0.1',
              description: 'address to listen on; loopback unless the scraper needs an internal interface',
            }),
            port: Port,
            exposed: Type.Boolean({
              default: false,
              description:
                'must be `true` for a `host` that is not loopback: production refuses to start otherwise, sandbox warns (D62). With it the start still warns, naming the exposure: the listener has no authentication, so keep it on a network only the scraper and the probes reach',
            }),
          },
          {
            additionalProperties: false,
            description:
              "the admin listener: `/metrics`, `/healthz`, `/readyz`, `/openapi.json` (D22), without authentication. The examples use 8442, beside the API's 8443: no usual neighbour of a gateway (Prometheus, Alertmanager, exporters, Grafana, cAdvisor, the OpenTelemetry Collector, Envoy) listens there by default",
          },
        ),
        connector: Type.Optional(
          Type.Object(
            {
              host: Type.String({ minLength: 1, default: '127.0.0.1', description: 'address to listen on; the connector must reach it' }),
              port: Port,
              clientCa: Type.Optional(
                Secret('the CA whose client certificates the listener accepts: mutual TLS, the connector presents a certificate it issued'),
              ),
            },
            {
              additionalProperties: false,
              description:
                "the connector listener (D64): HTTPS with the API's certificate, `POST /v1/events` only, where the connector posts processor-side events. Authenticated by mutual TLS (`clientCa`) or `connector.eventsSecret`, or both; production refuses it with neither. The examples use 8444",
            },
          ),
        ),
      },
      { additionalProperties: false, description: 'where the gateway listens' },
    ),
    tls: Type.Object(
      {
        cert: Secret('the PEM certificate (with its chain) of the API listener'),
        key: Secret('its PEM private key'),
      },
      {
        additionalProperties: false,
        description:
          "the API listener's certificate: TLS 1.2 (ECDHE with AES-GCM or ChaCha20-Poly1305 only) and TLS 1.3. A certificate (this one or `connector.tls.cert`) that ends within 14 days is a warning at start, reload and `--check-config`; an expired one stops a production start (D51)",
      },
    ),
    // D25: what a connection may cost before it has to show it is a real client.
    edge: Type.Object(
      {
        handshakeTimeoutMs: Millis(100, 10_000, 10_000, 'the TLS handshake must finish within this'),
        headersTimeoutMs: Millis(100, 10_000, 10_000, 'request headers must arrive within this'),
        requestTimeoutMs: Millis(100, 30_000, 30_000, 'the whole request must arrive within this'),
        keepAliveTimeoutMs: Millis(100, 10_000, 5_000, 'an idle keep-alive connection is closed after this'),
        firstRequestTimeoutMs: Millis(
          100,
          10_000,
          3_000,
          "a connection's first request (TLS handshake, request line and headers) must have arrived within this of its accept; past it: 408 where it can still be written, and the connection closed (D59). The TLS handshake deadline is never longer than this",
        ),
        maxConnections: PositiveInt({
          maximum: 1_000_000,
          default: 1024,
          description: 'concurrent connections on the public listeners; more are closed at accept',
        }),
        maxOutsiderConnections: Type.Integer({
          minimum: 0,
          maximum: 1_000_000,
          default: 64,
          description: 'of those, connections from direct peers outside the allowlist; more are closed at accept, before any TLS work',
        }),
      },
      { additionalProperties: false, default: {}, description: 'connection deadlines and caps (D25; see "Hostile traffic" in the operations guide)' },
    ),
    trustedProxies: Type.Array(Type.String(), {
      default: [],
      description:
        'CIDRs of load balancers whose `X-Forwarded-For` and `X-Forwarded-Proto` are believed. Never a hop count: a hop count trusts whatever the client wrote. Production refuses an entry of prefix length 0 (`0.0.0.0/0`, `::/0`: every peer could say who the client is), sandbox warns (D62)',
    }),
    allowlist: Type.Array(Type.String(), {
      minItems: 1,
      description:
        'client CIDRs, IPv4 and IPv6 (D10); IPv4 entries must be four-part decimal; IPv4-mapped IPv6 clients are matched as IPv4. Production refuses an entry of prefix length 0 (`0.0.0.0/0`, `::/0`), and one wider than a /8 (IPv4) or a /32 (IPv6) unless `allowlistWideRangesAllowed` is `true`; sandbox warns (D62)',
    }),
    allowlistWideRangesAllowed: Type.Boolean({
      default: false,
      description:
        '`true` lets production start with allowlist entries wider than a /8 (IPv4) or a /32 (IPv6), for a partner whose network is that large; never with a prefix length of 0 (D62)',
    }),
    store: StoreSchema,
    connector: Type.Object(
      {
        url: Type.String({ pattern: '^https?://[^/?#]+/?$', description: 'base URL of the processor-connector (no path)' }),
        timeoutMs: PositiveInt({
          maximum: 120000,
          default: 5000,
          description:
            'the whole answer must arrive within this, counted from the decision to forward (waiting for a pooled connection included); past it the client gets 504 (D19)',
        }),
        connections: PositiveInt({ maximum: 1024, default: 64, description: 'keep-alive pool size' }),
        maxAnswerBytes: PositiveInt({ maximum: 1_048_576, default: 65_536, description: 'largest connector answer read; a bigger one is a 502' }),
        tls: Type.Optional(
          Type.Object(
            {
              ca: Type.Optional(Secret("the CA to trust instead of the system's; the certificate is always verified")),
              cert: Type.Optional(Secret('client certificate, for mutual TLS')),
              key: Type.Optional(Secret('its private key')),
            },
            { additionalProperties: false, description: 'TLS to an `https://` connector' },
          ),
        ),
        sharedSecret: Type.Optional(Secret('sent as `X-Gateway-Secret`, where the connector wants a gateway-held secret instead of mutual TLS')),
        eventsSecret: Type.Optional(
          Secret('the secret the connector sends as `X-Connector-Secret` with every event it posts to the connector listener (D64), compared in constant time'),
        ),
        startSandbox: Type.Boolean({
          default: false,
          description:
            'environment local only: start the sandbox connector in-process on connector.url, which must then be an `http://` URL (`npm run connector` serves TLS and mutual TLS)',
        }),
      },
      { additionalProperties: false, description: 'the processor-connector the cards are forwarded to (see the connector contract)' },
    ),
    // D53: what one client address may take of one replica; decided in memory, before routing.
    limits: Type.Object(
      {
        perAddress: Type.Object(
          {
            requestsPerSecond: PositiveInt({
              maximum: 1_000_000,
              default: 200,
              description:
                'Requests one client address (after trusted-proxy resolution; IPv6 per /64) may send to one replica per second, across all routes. Past it: 429 rate_limited before routing, body reading, store or token work; a further request on the same connection within that second hears its 429 when the second ends, and the third refusal closes the connection. Counted per replica, not shared.',
            }),
            inFlight: PositiveInt({
              maximum: 1_000_000,
              default: 64,
              description: 'Requests of one client address one replica serves at once; past it: 429 rate_limited, as for requestsPerSecond.',
            }),
            connectionsPerSecond: PositiveInt({
              maximum: 1_000_000,
              default: 200,
              description:
                'New connections one peer address (IPv6 per /64) may open to one replica per second; past it the socket is closed at accept, before the TLS handshake. The default equals requestsPerSecond, so a client that opens a connection per request is served as far as its request budget goes (D59). Trusted proxies are exempt (their clients are known only from headers).',
            }),
            connections: PositiveInt({
              maximum: 1_000_000,
              default: 128,
              description:
                'Connections one peer address (IPv6 per /64) may hold open to one replica at once; past it a new one is closed at accept, before the TLS handshake (D59). Trusted proxies are exempt.',
            }),
          },
          { additionalProperties: false, default: {}, description: 'Per-address budgets of one replica (D53, D59).' },
        ),
      },
      { additionalProperties: false, default: {}, description: 'Budgets decided in memory by each replica, before routing.' },
    ),
    rateLimits: Type.Object(
      {
        login: Window(5, 60, 'login attempts per submitted username, known or not (D11)'),
        refresh: Window(5, 60, 'refreshes per credential (D11)'),
        loginPerAddress: Window(30, 60, 'login attempts per client address (IPv6 per /64), checked first (D27)'),
        // D48: per credential, shared by replicas.
        cardReads: Window(300, 60, 'card reads per credential: reading one card and listing together (D48)'),
        cardStatusChanges: Window(60, 60, 'card status changes per credential (D48)'),
        loginLockout: Type.Object(
          {
            maxConsecutiveFailures: PositiveInt({ default: 10, description: 'consecutive failed logins that lock a username; a success resets the count' }),
            lockoutSeconds: PositiveInt({ default: 1800, description: 'how long the lock lasts (429)' }),
          },
          { additionalProperties: false, default: {}, description: 'the failed-login lockout (D11a)' },
        ),
      },
      { additionalProperties: false, default: {}, description: 'counted in the shared store, all checked before any password hashing' },
    ),
    // D27: scrypt runs on the libuv pool; past these, login answers 503 at once instead of queueing.
    passwordHashing: Type.Object(
      {
        maxConcurrent: Type.Optional(
          PositiveInt({ maximum: 1024, description: 'password hashes running at once; default: the libuv pool size (`UV_THREADPOOL_SIZE`, 4)' }),
        ),
        maxConcurrentPerAddress: Type.Optional(PositiveInt({ maximum: 1024, description: 'of those, per client address; default: half of `maxConcurrent`' })),
      },
      { additionalProperties: false, default: {}, description: 'past either bound, login answers 503 `server_busy` at once (D27)' },
    ),
    tokens: Type.Object(
      {
        issuer: Type.String({ minLength: 1, description: 'names the environment; verified on every token (D1, D8)' }),
        audience: Type.String({ minLength: 1, description: 'names the environment; verified on every token (D1, D8)' }),
        algorithm: Type.Union([Type.Literal('EdDSA'), Type.Literal('ES256')], { default: 'EdDSA', description: 'EdDSA (Ed25519) or ES256' }),
        accessTokenTtlSeconds: PositiveInt({ maximum: 3600, default: 3600, description: 'access token lifetime (spec 8)' }),
        refreshTokenTtlSeconds: PositiveInt({ maximum: 86400, default: 86400, description: 'refresh token lifetime (spec 8)' }),
        // D41: every session's absolute end, counted from its login; rotations never move it.
        sessionMaxAgeHours: Type.Integer({
          minimum: 1,
          maximum: 720,
          default: 168,
          description:
            "every session's absolute end after its login: refreshes never move it, and `refreshTokenExpiresAt` is the earlier of the token's lifetime and that end (D41)",
        }),
        refreshGraceSeconds: Type.Integer({
          minimum: 0,
          maximum: 60,
          default: 60,
          description: 'a rotated refresh token keeps refreshing this long after its first use (D5)',
        }),
        clockToleranceSeconds: Type.Integer({ minimum: 0, maximum: 60, default: 5, description: 'skew allowed on `exp` and `iat`' }),
        verifiedTokenCacheSize: Type.Integer({
          minimum: 0,
          maximum: 1_000_000,
          default: 10000,
          description:
            'access tokens whose signature check is cached until `exp` (0 disables); permissions and deactivation are still checked on every request',
        }),
        signingKey: Type.Object(
          { kid: Type.String({ minLength: 1, description: "key id, in every token's header" }), privateKey: Secret('the PKCS#8 PEM private key') },
          { additionalProperties: false, description: 'the key that signs new tokens; its public half is always accepted' },
        ),
        verificationKeys: Type.Array(
          Type.Object({ kid: Type.String({ minLength: 1, description: 'key id' }), publicKey: Secret('the PEM public key') }, { additionalProperties: false }),
          {
            default: [],
            description: 'retired (or upcoming) keys still accepted; all are published at `/.well-known/jwks.json` (D24)',
          },
        ),
      },
      { additionalProperties: false, description: 'the session tokens (D1-D5)' },
    ),
    credentialsFile: Type.String({ minLength: 1, description: 'the operator-edited credentials file (its settings are listed below)' }),
    issuingAccounts: Type.Record(
      Type.String({ minLength: 1 }),
      Type.Object(
        {
          currencies: Type.Array(Type.String({ pattern: '^[A-Z]{3}$' }), {
            minItems: 1,
            uniqueItems: true,
            description: 'ISO 4217 codes enabled for the account, e.g. `[EUR, USD]`',
          }),
        },
        { additionalProperties: false },
      ),
      { description: 'the issuing accounts, by name, and the currencies each may issue in' },
    ),
    cards: Type.Object(
      {
        // D37: records carry the id of the key that sealed them; older keys still open theirs.
        encryptionKey: CardRecordKey('the key that seals PAN and CVC (AES-256-GCM) in idempotency records (D18); every record carries its `kid` (D37)'),
        previousEncryptionKeys: Type.Array(CardRecordKey('a retired key'), {
          default: [],
          description:
            'keys retired from sealing that still open the records they sealed; a record no configured key opens answers 500 `record_unreadable` (see the card-record key rotation runbook)',
        }),
        idempotencyTtlSeconds: PositiveInt({ maximum: 7 * 86400, default: 86400, description: 'replay window of a `requestId` (D17)' }),
        bodyLimitBytes: PositiveInt({ maximum: 1048576, default: 16384, description: 'request body limit; above it 413 (D14)' }),
        maxWaitersPerKey: PositiveInt({
          maximum: 100_000,
          default: 100,
          description: 'concurrent duplicates of one `requestId` that wait in one process; more get 409 at once',
        }),
      },
      { additionalProperties: false, description: 'card creation' },
    ),
    audit: Type.Object(
      {
        file: Type.String({ minLength: 1, description: 'the JSON-lines audit trail (D21), created mode 0640 and reopened on `SIGHUP` (log rotation)' }),
        fsync: Type.Boolean({ default: false, description: '`true` flushes every write to disk' }),
        maxDenialLinesPerMinute: PositiveInt({
          maximum: 1_000_000,
          default: 1000,
          description: 'refusal summaries written per minute at most; the rest are counted in one overflow line (D25)',
        }),
      },
      { additionalProperties: false, description: 'the audit trail' },
    ),
    // D38: behind a load balancer, /readyz turns 503 at SIGTERM and the listeners keep serving
    // for delaySeconds (so the balancer stops sending), then stop accepting and drain.
    shutdown: Type.Object(
      {
        delaySeconds: Type.Integer({
          minimum: 0,
          maximum: 120,
          default: 0,
          description: 'after SIGTERM, `/readyz` answers 503 and the listeners keep serving this long',
        }),
        drainTimeoutSeconds: Type.Integer({
          minimum: 1,
          maximum: 300,
          default: 25,
          description: 'then they stop accepting and drain in-flight requests for at most this long',
        }),
      },
      { additionalProperties: false, default: {}, description: 'the SIGTERM sequence (D38)' },
    ),
    events: EventsSchema,
    logging: Type.Object(
      {
        level: Type.Union(
          ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((level) => Type.Literal(level)),
          {
            default: 'info',
            description: 'pino level of the JSON logs on stdout; one line per request at `debug` only; production refuses `debug` and `trace` (D32)',
          },
        ),
      },
      { additionalProperties: false, default: {}, description: 'the logs (see "Logs" in the operations guide)' },
    ),
  },
  { additionalProperties: false },
);

export type ConfigFile = Static<typeof ConfigFileSchema>;
