import { eventSchemaName } from '../../events/event-schemas.js';
import { EVENT_TYPES, type EventType } from '../../foundation/event-types.js';

/** What each event type tells, in the webhook's summary. */
const SUMMARIES: Record<EventType, string> = {
  'card.created': 'A card was created',
  'card.status_changed': "A card's status changed (through the API or at the processor)",
  'transaction.authorized': 'The processor authorized a transaction of a card',
  'transaction.declined': 'The processor declined a transaction of a card',
  'transaction.cleared': 'A transaction of a card cleared',
  'transaction.reversed': 'A transaction of a card was reversed',
};

const DELIVERY = `Delivered per Standard Webhooks 1.0 to every endpoint the operator configured for the issuing account that takes this type: a POST of the event's JSON, signed. Verify the signature on the raw body before parsing (the client package's verifyEvent does), refuse a timestamp more than 5 minutes away, deduplicate on webhook-id, order a card's events by sequence, and answer any 2xx within 10 seconds. Anything else is retried: at once, then after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h; 410 stops deliveries to the endpoint until the operator reloads.`;

const headers = [
  { name: 'webhook-id', in: 'header', required: true, schema: { type: 'string' }, description: "The event's id: the same on every retry of this event." },
  { name: 'webhook-timestamp', in: 'header', required: true, schema: { type: 'string', pattern: '^[0-9]+$' }, description: 'Unix seconds of this attempt.' },
  {
    name: 'webhook-signature',
    in: 'header',
    required: true,
    schema: { type: 'string' },
    description:
      'Space-separated `v1,<base64>` signatures, one per secret of the endpoint (two during a rotation): HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>` under the base64-decoded part of the `whsec_` secret.',
  },
];

/** The OpenAPI 3.1 `webhooks` of the events (D63, D65): one per type, its body the event's schema. */
export function eventWebhooks(): Record<string, unknown> {
  return Object.fromEntries(
    EVENT_TYPES.map((type) => [
      type,
      {
        post: {
          operationId: `${type.replace(/[._](.)/g, (_match, letter: string) => letter.toUpperCase())}Webhook`,
          summary: SUMMARIES[type],
          description: DELIVERY,
          tags: ['events'],
          security: [{ webhookSignature: [] }],
          parameters: headers,
          requestBody: { required: true, content: { 'application/json': { schema: { $ref: `#/components/schemas/${eventSchemaName(type)}` } } } },
          responses: {
            '200': { description: 'Received (any 2xx is).' },
            '410': { description: 'The endpoint is gone: deliveries to it stop until the operator reloads the configuration.' },
          },
        },
      },
    ]),
  );
}
