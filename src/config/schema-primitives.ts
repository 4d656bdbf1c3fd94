import { Type, type Static } from '@sinclair/typebox';

/** The building blocks of the config file's schema (config-schema.ts, store-schema.ts). */

/**
 * A secret is never written in a committed file: the config names where it lives, either a
 * file (`{ file: /run/secrets/x }`, relative paths from the config file's folder) or an
 * environment variable (`{ env: NAME }`).
 */
const secretRefMembers = {
  file: Type.Optional(Type.String({ minLength: 1 })),
  env: Type.Optional(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$' })),
};
/** A secret reference; `description` says what the secret is (the configuration reference prints it). */
export const Secret = (description: string) => Type.Object(secretRefMembers, { additionalProperties: false, minProperties: 1, maxProperties: 1, description });
export const SecretRefSchema = Secret('a secret: `{ file: PATH }` or `{ env: VARIABLE }`');
export type SecretRef = Static<typeof SecretRefSchema>;

export const Port = Type.Integer({ minimum: 0, maximum: 65535, description: 'port to listen on' });
export const CardRecordKey = (description: string) =>
  Type.Object(
    {
      kid: Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$', description: 'key id written into every record the key seals (D37)' }),
      key: Secret('32 bytes, written as 64 hex digits or base64'),
    },
    { additionalProperties: false, description },
  );
/** A Redis node or sentinel as `host:port` (IPv6 in brackets). */
export const RedisNode = Type.String({ pattern: '^(\\[[0-9A-Fa-f:.]+\\]|[^\\s:\\[\\]/]+):[0-9]{1,5}$', description: 'host:port' });
export const Listener = (description: string) =>
  Type.Object({ host: Type.String({ minLength: 1, description: 'address to listen on' }), port: Port }, { additionalProperties: false, description });
export const PositiveInt = (options: { maximum?: number; default?: number; description?: string } = {}) => Type.Integer({ minimum: 1, ...options });
export const Millis = (minimum: number, maximum: number, value: number, description: string) => Type.Integer({ minimum, maximum, default: value, description });
export const Window = (points: number, windowSeconds: number, description: string) =>
  Type.Object(
    {
      points: PositiveInt({ default: points, description: 'requests allowed per window' }),
      windowSeconds: PositiveInt({
        default: windowSeconds,
        description: 'length of the window; windows are fixed, so a burst across an edge can see twice the limit',
      }),
    },
    { additionalProperties: false, default: {}, description },
  );
