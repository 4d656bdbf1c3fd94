import type { Logger } from 'pino';
import { containsCardNumber, maskCardNumbers } from '../foundation/card-number-detector.js';
import type { EventCard } from '../foundation/event-types.js';
import type { CardEvents } from '../cards/card-ports.js';
import type { EventRecorder } from './event-recording.js';

/** D63: no event carries a card number; metadata is free text and gets D58's mask. */
function withoutCardNumbers(card: EventCard): EventCard {
  const { metadata } = card;
  if (!metadata || !Object.values(metadata).some(containsCardNumber)) return card;
  return { ...card, metadata: Object.fromEntries(Object.entries(metadata).map(([key, value]) => [key, maskCardNumbers(value)])) };
}

/**
 * The card use cases' events port on the recorder: `card.created` (a repeat of one card's creation
 * records nothing) and `card.status_changed` with source `api`. A failure is one error line.
 */
export function cardEvents(recorder: EventRecorder, logger: Logger): CardEvents {
  const failed = (type: string, cardId: string) => (error: unknown) => {
    logger.error(
      { eventType: type, cardId, err: { message: (error as Error).message } },
      'event not recorded yet: the store did not take it; the Redis store writes it again once it answers (for up to 10 minutes), else partners do not hear of this change',
    );
  };
  return {
    created: (issuingAccount, card) =>
      recorder
        .record({
          type: 'card.created',
          issuingAccount,
          cardId: card.cardId,
          source: 'api',
          data: { card: withoutCardNumbers(card) },
          dedupeKey: `created:${card.cardId}`,
        })
        .then(() => undefined, failed('card.created', card.cardId)),
    statusChanged: (issuingAccount, { card, previousStatus, reason, credentialId }) =>
      recorder
        .record({
          type: 'card.status_changed',
          issuingAccount,
          cardId: card.cardId,
          source: 'api',
          data: {
            card: withoutCardNumbers(card),
            previousStatus,
            status: card.status,
            ...(reason !== undefined && { reason }),
            source: 'api',
            credentialId,
          },
        })
        .then(() => undefined, failed('card.status_changed', card.cardId)),
  };
}
