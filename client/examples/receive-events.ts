import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { verifyEvent, WebhookVerificationError, type GatewayEvent } from '@card-gateway/client';

// The endpoint's secret (whsec_...); during a rotation, list the new one and the old one.
const secrets = [process.env.WEBHOOK_SECRET ?? readFileSync('config/.local/events-webhook.secret', 'utf8').trim()];

// Keep both in your database: a delivery may come more than once, and a retry may arrive
// after a newer event of the same card.
const handled = new Set<string>();
const cardSequence = new Map<string, number>();

function apply(event: GatewayEvent): void {
  switch (event.type) {
    case 'card.created':
    case 'card.status_changed': {
      const { card } = event.data;
      if ((cardSequence.get(card.cardId) ?? 0) > event.sequence) return; // older than what we know
      cardSequence.set(card.cardId, event.sequence);
      console.log(`${card.cardId} is ${card.status}`);
      return;
    }
    case 'transaction.authorized':
    case 'transaction.declined':
    case 'transaction.cleared':
    case 'transaction.reversed':
      console.log(`${event.type}: ${event.data.amount} ${event.data.currency} at ${event.data.merchant.name}`);
      return;
    default:
      // A type a newer gateway added: acknowledge it, so it is not sent again.
      return;
  }
}

createServer(async (request, response) => {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  try {
    // The body exactly as received: parsed and serialised again, it would no longer match.
    const event = verifyEvent(secrets, request.headers, Buffer.concat(chunks));
    const deliveryId = String(request.headers['webhook-id']);
    if (!handled.has(deliveryId)) {
      apply(event);
      handled.add(deliveryId);
    }
    response.writeHead(204).end();
  } catch (error) {
    const refused = error instanceof WebhookVerificationError;
    console.error(refused ? `refused: ${error.reason}` : error);
    response.writeHead(refused ? 401 : 500).end();
  }
}).listen(9800, '127.0.0.1');
