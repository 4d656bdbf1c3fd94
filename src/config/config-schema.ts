import { Type, type Static } from '@sinclair/typebox';

/**
 * A secret is never written in a committed file: the config names where it lives, either a
 * file (`{ file: /run/secrets/x }`, relative paths from the config file's folder) or an
 * environment variable (`{ env: NAME }`).
 */
export const SecretRefSchema = Type.Object(
  {
    file: Type.Optional(Type.String({ minLength: 1 })),
    env: Type.Optional(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$' })),
  },
  { additionalProperties: false, minProperties: 1, maxProperties: 1, description: 'exactly one of { file } or { env }' },
);
export type SecretRef = Static<typeof SecretRefSchema>;

const Port = Type.Integer({ minimum: 0, maximum: 65535 });
const CardRecordKey = Type.Object(
  { kid: Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$', description: 'key id written into every record the key seals' }), key: SecretRefSchema },
  { additionalProperties: false },
);
/** A Redis node or sentinel as `host:port` (IPv6 in brackets). */
const RedisNode = Type.String({ pattern: '^(\\[[0-9A-Fa-f:.]+\\]|[^\\s:\\[\\]/]+):[0-9]{1,5}$', description: 'host:port' });
const Listener = Type.Object({ host: Type.String({ minLength: 1 }), port: Port }, { additionalProperties: false });
const PositiveInt = (options: { maximum?: number; default?: number } = {}) => Type.Integer({ minimum: 1, ...options });
const Millis = (minimum: number, maximum: number, value: number, description: string) => Type.Integer({ minimum, maximum, default: value, description });
const Window = (points: number, windowSeconds: number) =>
  Type.Object(
    { points: PositiveInt({ default: points }), windowSeconds: PositiveInt({ default: windowSeconds }) },
    { additionalProperties: false, default: {} },
  );

export const ConfigFileSchema = Type.Object(
  {
    environment: Type.Union([Type.Literal('local'), Type.Literal('sandbox'), Type.Literal('production')]),
    listeners: Type.Object(
      {
        https: Listener,
        plainHttp: Type.Optional(Listener),
        admin: Type.Object({ host: Type.String({ minLength: 1, default: '127.0.0.1' }), port: Port }, { additionalProperties: false }),
      },
      { additionalProperties: false },
    ),
    tls: Type.Object({ cert: SecretRefSchema, key: SecretRefSchema }, { additionalProperties: false }),
    // D25: what a connection may cost before it has to show it is a real client.
    edge: Type.Object(
      {
        handshakeTimeoutMs: Millis(100, 10_000, 10_000, 'the TLS handshake must finish within this'),
        headersTimeoutMs: Millis(100, 10_000, 10_000, 'request headers must arrive within this'),
        requestTimeoutMs: Millis(100, 30_000, 30_000, 'the whole request must arrive within this'),
        keepAliveTimeoutMs: Millis(100, 10_000, 5_000, 'an idle keep-alive connection is closed after this'),
        maxConnections: PositiveInt({ maximum: 1_000_000, default: 1024 }),
        maxOutsiderConnections: Type.Integer({ minimum: 0, maximum: 1_000_000, default: 64 }),
      },
      { additionalProperties: false, default: {} },
    ),
    trustedProxies: Type.Array(Type.String(), { default: [] }),
    allowlist: Type.Array(Type.String(), { minItems: 1 }),
    store: Type.Object(
      {
        kind: Type.Union([Type.Literal('memory'), Type.Literal('redis')]),
        // D35: exactly one of url, sentinel or cluster (checked by the loader, one clear line).
        redis: Type.Optional(
          Type.Object(
            {
              url: Type.Optional(Type.String({ pattern: '^rediss?://' })),
              sentinel: Type.Optional(
                Type.Object(
                  {
                    masterName: Type.String({ minLength: 1 }),
                    nodes: Type.Array(RedisNode, { minItems: 1 }),
                    password: Type.Optional(SecretRefSchema),
                  },
                  { additionalProperties: false },
                ),
              ),
              cluster: Type.Optional(Type.Object({ nodes: Type.Array(RedisNode, { minItems: 1 }) }, { additionalProperties: false })),
              password: Type.Optional(SecretRefSchema),
              tls: Type.Optional(
                Type.Object(
                  { ca: Type.Optional(SecretRefSchema), servername: Type.Optional(Type.String({ minLength: 1 })) },
                  { additionalProperties: false, description: 'TLS to every Redis node and sentinel' },
                ),
              ),
              keyPrefix: Type.String({ minLength: 1 }),
              commandTimeoutMs: PositiveInt({ maximum: 5000, default: 300 }),
              connectTimeoutMs: PositiveInt({ maximum: 10000, default: 500 }),
              replicasToAck: Type.Integer({ minimum: 0, maximum: 5, default: 0 }),
            },
            { additionalProperties: false },
          ),
        ),
      },
      { additionalProperties: false },
    ),
    connector: Type.Object(
      {
        url: Type.String({ pattern: '^https?://[^/?#]+/?$' }),
        timeoutMs: PositiveInt({ maximum: 120000, default: 5000 }),
        connections: PositiveInt({ maximum: 1024, default: 64 }),
        maxAnswerBytes: PositiveInt({ maximum: 1_048_576, default: 65_536 }),
        tls: Type.Optional(
          Type.Object(
            { ca: Type.Optional(SecretRefSchema), cert: Type.Optional(SecretRefSchema), key: Type.Optional(SecretRefSchema) },
            { additionalProperties: false },
          ),
        ),
        sharedSecret: Type.Optional(SecretRefSchema),
        startSandbox: Type.Boolean({
          default: false,
          description: 'environment local only: start the sandbox connector in-process on connector.url',
        }),
      },
      { additionalProperties: false },
    ),
    rateLimits: Type.Object(
      {
        login: Window(5, 60),
        refresh: Window(5, 60),
        loginPerAddress: Window(30, 60),
        // D48: per credential, shared by replicas; reads are GET of one card and listing together.
        cardReads: Window(300, 60),
        cardStatusChanges: Window(60, 60),
        loginLockout: Type.Object(
          {
            maxConsecutiveFailures: PositiveInt({ default: 10 }),
            lockoutSeconds: PositiveInt({ default: 1800 }),
          },
          { additionalProperties: false, default: {} },
        ),
      },
      { additionalProperties: false, default: {} },
    ),
    // D27: scrypt runs on the libuv pool; past these, login answers 503 at once instead of queueing.
    passwordHashing: Type.Object(
      {
        maxConcurrent: Type.Optional(PositiveInt({ maximum: 1024 })),
        maxConcurrentPerAddress: Type.Optional(PositiveInt({ maximum: 1024 })),
      },
      { additionalProperties: false, default: {} },
    ),
    tokens: Type.Object(
      {
        issuer: Type.String({ minLength: 1 }),
        audience: Type.String({ minLength: 1 }),
        algorithm: Type.Union([Type.Literal('EdDSA'), Type.Literal('ES256')], { default: 'EdDSA' }),
        accessTokenTtlSeconds: PositiveInt({ maximum: 3600, default: 3600 }),
        refreshTokenTtlSeconds: PositiveInt({ maximum: 86400, default: 86400 }),
        // D41: every session's absolute end, counted from its login; rotations never move it.
        sessionMaxAgeHours: Type.Integer({ minimum: 1, maximum: 720, default: 168 }),
        refreshGraceSeconds: Type.Integer({ minimum: 0, maximum: 60, default: 60 }),
        clockToleranceSeconds: Type.Integer({ minimum: 0, maximum: 60, default: 5 }),
        verifiedTokenCacheSize: Type.Integer({ minimum: 0, maximum: 1_000_000, default: 10000 }),
        signingKey: Type.Object({ kid: Type.String({ minLength: 1 }), privateKey: SecretRefSchema }, { additionalProperties: false }),
        verificationKeys: Type.Array(Type.Object({ kid: Type.String({ minLength: 1 }), publicKey: SecretRefSchema }, { additionalProperties: false }), {
          default: [],
        }),
      },
      { additionalProperties: false },
    ),
    credentialsFile: Type.String({ minLength: 1 }),
    issuingAccounts: Type.Record(
      Type.String({ minLength: 1 }),
      Type.Object({ currencies: Type.Array(Type.String({ pattern: '^[A-Z]{3}$' }), { minItems: 1, uniqueItems: true }) }, { additionalProperties: false }),
    ),
    cards: Type.Object(
      {
        // D37: records carry the id of the key that sealed them; older keys still open theirs.
        encryptionKey: CardRecordKey,
        previousEncryptionKeys: Type.Array(CardRecordKey, { default: [] }),
        idempotencyTtlSeconds: PositiveInt({ maximum: 7 * 86400, default: 86400 }),
        bodyLimitBytes: PositiveInt({ maximum: 1048576, default: 16384 }),
        maxWaitersPerKey: PositiveInt({ maximum: 100_000, default: 100 }),
      },
      { additionalProperties: false },
    ),
    audit: Type.Object(
      {
        file: Type.String({ minLength: 1 }),
        fsync: Type.Boolean({ default: false }),
        maxDenialLinesPerMinute: PositiveInt({ maximum: 1_000_000, default: 1000 }),
      },
      { additionalProperties: false },
    ),
    // D38: behind a load balancer, /readyz turns 503 at SIGTERM and the listeners keep serving
    // for delaySeconds (so the balancer stops sending), then stop accepting and drain.
    shutdown: Type.Object(
      {
        delaySeconds: Type.Integer({ minimum: 0, maximum: 120, default: 0 }),
        drainTimeoutSeconds: Type.Integer({ minimum: 1, maximum: 300, default: 25 }),
      },
      { additionalProperties: false, default: {} },
    ),
    logging: Type.Object(
      {
        level: Type.Union(
          ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((level) => Type.Literal(level)),
          { default: 'info' },
        ),
      },
      { additionalProperties: false, default: {} },
    ),
  },
  { additionalProperties: false },
);

export type ConfigFile = Static<typeof ConfigFileSchema>;
