import { deadlineSignal } from '../foundation/deadline.js';
import { isCardCanceledAnswer, parseCardPage, parseCardRecord, parseStatusAnswer } from './connector-answers.js';
import { CONNECTOR_HEADERS, CONNECTOR_PATHS, parseConnectorCard } from './connector-contract.js';
import { ConnectorError, type ConnectorClient } from './connector-port.js';
import { getCardRequest, listCardsRequest, setCardStatusRequest } from './connector-requests.js';
import { createConnectorPool, sendToConnector, type ConnectorSettings } from './connector-transport.js';

/**
 * The 4xx answers that are about the card id a client chose (unknown, foreign, malformed, longer
 * than the connector takes): that card is not found, the connector did not fail (D60). Other
 * 4xx (401, 403, 429, ...) refuse the gateway itself and stay failures: no call can succeed.
 */
const NOT_THIS_CARD: ReadonlySet<number> = new Set([400, 404, 410, 414, 422]);

/**
 * The connector port (connector-port.ts) on an undici pool, the one module that knows undici (a
 * forward whose answer must be checked, stored and masked is an HTTP client call, not a proxy).
 * Every call has the same total deadline, answer-size cap and strict answer check
 * (connector-transport.ts, connector-answers.ts), and is built only from the contract's fields.
 */
export function createConnectorClient(settings: ConnectorSettings): ConnectorClient {
  const pool = createConnectorPool(settings);

  return {
    async createCard(payload, meta) {
      const body = JSON.stringify(payload);
      const { status, text } = await sendToConnector(pool, settings, {
        method: 'POST',
        path: CONNECTOR_PATHS.createCard,
        headers: {
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(body)),
          accept: 'application/json',
          [CONNECTOR_HEADERS.idempotencyKey]: meta.idempotencyKey,
          [CONNECTOR_HEADERS.correlationId]: meta.correlationId,
          ...(settings.sharedSecret !== undefined && { [CONNECTOR_HEADERS.gatewaySecret]: settings.sharedSecret }),
        },
        body,
      });
      if (status !== 200 && status !== 201) throw new ConnectorError('status', { status });
      const replayed = status === 200;
      // A replay (200) is the card the connector made for this key earlier, possibly from a
      // different payload (D31): its shape is checked, not that it matches this request.
      const card = parseConnectorCard(text, replayed ? undefined : { cardLimit: payload.cardLimit, currency: payload.currency });
      if (!card) throw new ConnectorError('invalid_answer', { status });
      return { card, replayed };
    },
    async getCard(issuingAccount, cardId, meta) {
      // An empty id would address the list, not a card: no card has it.
      if (cardId === '') return null;
      const { status, text } = await sendToConnector(pool, settings, getCardRequest(settings, issuingAccount, cardId, meta));
      if (NOT_THIS_CARD.has(status)) return null;
      if (status !== 200) throw new ConnectorError('status', { status });
      const record = parseCardRecord(text, cardId);
      if (!record) throw new ConnectorError('invalid_answer', { status });
      return record;
    },
    async listCards(query, meta) {
      const { status, text } = await sendToConnector(pool, settings, listCardsRequest(settings, query, meta));
      if (status !== 200) throw new ConnectorError('status', { status });
      const page = parseCardPage(text, query.limit);
      if (!page) throw new ConnectorError('invalid_answer', { status });
      return page;
    },
    async setCardStatus(cardId, change, meta) {
      if (cardId === '') return { outcome: 'not_found' };
      const { status, text } = await sendToConnector(pool, settings, setCardStatusRequest(settings, cardId, change, meta));
      if (status === 409 && isCardCanceledAnswer(text)) return { outcome: 'card_canceled' };
      if (NOT_THIS_CARD.has(status)) return { outcome: 'not_found' };
      if (status !== 200) throw new ConnectorError('status', { status });
      // A 200 is the card after the change, in the status asked for, with what it was before (D57).
      const answer = parseStatusAnswer(text, cardId, change.status);
      if (!answer) throw new ConnectorError('invalid_answer', { status });
      const { previousStatus, changed, ...card } = answer;
      return { outcome: 'updated', card, previousStatus, changed };
    },
    async health() {
      const stats = pool.stats;
      // Every connection busy and requests queued: new cards would only wait (readiness says so).
      if (stats.queued > 0) throw Object.assign(new Error('connector pool saturated'), { state: 'saturated' });
      const deadline = deadlineSignal(1000);
      try {
        const response = await pool.request({ method: 'GET', path: CONNECTOR_PATHS.health, signal: deadline.signal });
        await response.body.dump();
        if (response.statusCode !== 200) throw new Error(`connector health ${response.statusCode}`);
      } finally {
        deadline.clear();
      }
    },
    poolLoad() {
      const stats = pool.stats;
      // undici's `pending` already counts the pool's queue: in flight is what is being sent or answered.
      return { inFlight: stats.running, queued: stats.queued };
    },
    close: () => pool.close(),
  };
}
