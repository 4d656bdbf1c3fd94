import type { Logger } from 'pino';
import { containsCardNumber, maskCardNumbers } from '../foundation/card-number-detector.js';
import type { CardStatus } from '../foundation/card-status.js';
import type { EventCard } from '../foundation/event-types.js';
import type { EventRecorder } from '../events/event-recording.js';

/**
 * The events the card use cases emit (D64): `card.created` and `card.status_changed` with source
 * `api`. Each call is made in the same turn as the card's own store write, so it travels in the
 * same round trip and adds none a request waits for. The promise never rejects: the card is done
 * whatever happens to its event, and a failure is one error line for the operator.
 */
export interface CardEvents {
  created(issuingAccount: string, card: EventCard): Promise<void>;
  statusChanged(
    issuingAccount: string,
    change: { card: EventCard; previousStatus: CardStatus; reason: string | undefined; credentialId: string },
  ): Promise<void>;
}

/** Events disabled, or a test that does not look at them. */
export const NO_CARD_EVENTS: CardEvents = { created: async () => undefined, statusChanged: async () => undefined };

/** D63: no event carries a card number; metadata is free text and gets D58's mask. */
function withoutCardNumbers(card: EventCard): EventCard {
  const { metadata } = card;
  if (!metadata || !Object.values(metadata).some(containsCardNumber)) return card;
  return { ...card, metadata: Object.fromEntries(Object.entries(metadata).map(([key, value]) => [key, maskCardNumbers(value)])) };
}

export function cardEvents(recorder: EventRecorder, logger: Logger): CardEvents {
  const failed = (type: string, cardId: string) => (error: unknown) => {
    logger.error(
      { eventType: type, cardId, err: { message: (error as Error).message } },
      'event not recorded: the store did not take it; partners will not hear of this change',
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
