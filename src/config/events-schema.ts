import { Type } from '@sinclair/typebox';
import { EVENT_TYPES } from '../foundation/event-types.js';
import { PositiveInt, Secret } from './schema-primitives.js';

/** The `events` section (D63-D66): what is kept, and where each issuing account's events are delivered. */
export const EventEndpointSchema = Type.Object(
  {
    id: Type.String({
      pattern: '^[A-Za-z0-9_-]{1,64}$',
      description: "the endpoint's name: metric labels, the admin listener's routes and the audit trail use it; unique in the file",
    }),
    issuingAccount: Type.String({ minLength: 1, description: 'the issuing account whose events it receives (one of `issuingAccounts`)' }),
    url: Type.String({
      pattern: '^https?://[^\\s]+$',
      maxLength: 2048,
      description: 'where each event is POSTed; production refuses `http://` (D65)',
    }),
    types: Type.Optional(
      Type.Array(Type.Union(EVENT_TYPES.map((type) => Type.Literal(type))), {
        minItems: 1,
        uniqueItems: true,
        description: 'the event types it receives; omitted: all',
      }),
    ),
    secrets: Type.Array(Secret('a `whsec_<base64>` signing secret (Standard Webhooks), 24 to 64 bytes once decoded'), {
      minItems: 1,
      maxItems: 4,
      description:
        'the first signs; every one is sent as a signature of its own, so a secret rotates without a gap (list the new one second, then first, then drop the old)',
    }),
    timeoutMs: PositiveInt({ maximum: 60_000, default: 10_000, description: 'an answer must have arrived within this, else the attempt is retried' }),
    maxInFlight: PositiveInt({ maximum: 64, default: 4, description: 'deliveries to it in flight at once, per replica' }),
  },
  { additionalProperties: false },
);

export const EventsSchema = Type.Object(
  {
    enabled: Type.Boolean({ default: true, description: '`false`: no event is recorded or delivered, and the event routes answer an empty list' }),
    retentionDays: Type.Integer({
      minimum: 2,
      maximum: 30,
      default: 7,
      description: 'how long events (and failed deliveries) are kept and readable; at least 2 days, so that the whole retry schedule fits',
    }),
    allowPrivateNetworks: Type.Boolean({
      default: false,
      description:
        'production only: `true` lets deliveries reach loopback, private, link-local and unique-local addresses (checked at connect time, after DNS). Sandbox and local always allow them',
    }),
    pollIntervalMs: Type.Integer({
      minimum: 50,
      maximum: 60_000,
      default: 1000,
      description: 'how often each replica looks for due deliveries; a new event is also sent at once by the replica that recorded it',
    }),
    endpoints: Type.Array(EventEndpointSchema, { default: [], description: 'webhook endpoints, per issuing account (hot-reloaded)' }),
  },
  { additionalProperties: false, default: {}, description: 'events and their delivery to partners (D63-D66); reloaded with SIGHUP' },
);
