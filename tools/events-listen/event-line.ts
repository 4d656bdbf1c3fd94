import { EVENT_TYPES, type GatewayEvent } from '../../client/src/index.js';

const known = (type: string): boolean => (EVENT_TYPES as readonly string[]).includes(type);

/** Free text shown quoted, so that a reason with spaces stays one field of the line. */
const quoted = (text: string): string => JSON.stringify(text);

/**
 * One line per event: `<createdAt> <type> <id> card=<cardId> seq=<sequence>`, then what changed:
 * the status (card events) or the amount and currency (transactions).
 */
export function eventLine(event: GatewayEvent): string {
  const head = `${event.createdAt} ${event.type} ${event.id}`;
  // A type a newer gateway added: its data is unknown to this client.
  if (!known(event.type)) return `${head} card=? seq=${event.sequence} (a type this client does not know)`;
  switch (event.type) {
    case 'card.created':
      return `${head} card=${event.data.card.cardId} seq=${event.sequence} status=${event.data.card.status}`;
    case 'card.status_changed': {
      const { card, previousStatus, status, source, reason } = event.data;
      const why = reason === undefined ? '' : ` reason=${quoted(reason)}`;
      return `${head} card=${card.cardId} seq=${event.sequence} status=${previousStatus}->${status} source=${source}${why}`;
    }
    default: {
      const { cardId, amount, currency, declineReason } = event.data;
      const why = declineReason === undefined ? '' : ` declineReason=${quoted(declineReason)}`;
      return `${head} card=${cardId} seq=${event.sequence} amount=${amount} currency=${currency}${why}`;
    }
  }
}
