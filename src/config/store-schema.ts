import { Type } from '@sinclair/typebox';
import { PositiveInt, RedisNode, Secret } from './schema-primitives.js';

/** The `store` section of the config file: where the shared state lives (D35, D50, D54). */
export const StoreSchema = Type.Object(
  {
    kind: Type.Union([Type.Literal('memory'), Type.Literal('redis')], { description: '`memory` (one process only) or `redis` (shared by every replica)' }),
    // D35: exactly one of url, sentinel or cluster (checked by the loader, one clear line).
    redis: Type.Optional(
      Type.Object(
        {
          url: Type.Optional(Type.String({ pattern: '^rediss?://', description: 'one server, `redis://` or `rediss://` (TLS)' })),
          sentinel: Type.Optional(
            Type.Object(
              {
                masterName: Type.String({ minLength: 1, description: 'the master group the sentinels watch' }),
                nodes: Type.Array(RedisNode, { minItems: 1, description: 'the sentinels to ask for the master' }),
                password: Type.Optional(Secret('only when the sentinels require a password of their own')),
              },
              { additionalProperties: false, description: 'a master with replicas, promoted by Redis Sentinel when it fails' },
            ),
          ),
          cluster: Type.Optional(
            Type.Object(
              { nodes: Type.Array(RedisNode, { minItems: 1, description: 'any reachable nodes; the rest is discovered' }) },
              { additionalProperties: false, description: 'Redis Cluster: high availability and sharding; `keyPrefix` must not contain `{` or `}`' },
            ),
          ),
          password: Type.Optional(Secret('the Redis password; production needs one, read from a `{ file }` (D50)')),
          tls: Type.Optional(
            Type.Object(
              {
                ca: Type.Optional(Secret("the CA to trust instead of the system's")),
                servername: Type.Optional(Type.String({ minLength: 1, description: 'the name to check the certificates against' })),
              },
              { additionalProperties: false, description: 'TLS to every Redis node and sentinel (a `rediss://` url turns it on by itself)' },
            ),
          ),
          keyPrefix: Type.String({ minLength: 1, description: "namespace of this environment's keys, e.g. `cig:production:` (D8)" }),
          commandTimeoutMs: PositiveInt({ maximum: 5000, default: 300, description: 'every command fails after this; no offline queue (D23)' }),
          connectTimeoutMs: PositiveInt({ maximum: 10000, default: 500, description: 'a connection attempt fails after this (D23)' }),
          replicasToAck: Type.Integer({
            minimum: 0,
            maximum: 5,
            default: 0,
            description: "replicas that must acknowledge a card's idempotency record (`WAIT`) before the client is answered",
          }),
        },
        {
          additionalProperties: false,
          description: 'required when `kind` is `redis`: exactly one of `url`, `sentinel` or `cluster` (D35); the other settings apply to all three',
        },
      ),
    ),
  },
  { additionalProperties: false, description: 'where the shared state lives (refresh-token families, idempotency records, rate-limit counters, lockouts)' },
);
