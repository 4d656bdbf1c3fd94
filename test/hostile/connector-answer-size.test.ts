import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testCertificatePem } from '../support/gateway-fixture.js';
import { adminGet, expectCodedError, INSIDER, listenCardGateway, metricSum, type CardClientGateway, type HttpAnswer } from './support.js';

/**
 * Issue 8, connector pool (README "Hostile traffic", `connector.maxAnswerBytes`): the connector is
 * not trusted to be small. An answer of exactly the cap is read and processed as usual; one byte
 * more is a 502 `connector_invalid_answer`, and an answer far over the cap that then stalls gets
 * its 502 as soon as the cap is passed (not at the connector deadline), with the upstream request
 * aborted: the connector sees its connection closed before its answer is finished, and the only
 * pooled connection is free for the next card.
 *
 * The connector here is a plain HTTP server written for the test, because the sandbox connector
 * cannot answer with a chosen size. Its card is a valid contract card; the bytes up to the wanted
 * size are trailing JSON whitespace, so "at the cap" is a card the gateway must accept.
 */

const CAP = 4096;
/** Far above any legitimate wait in this test: a 504 means the cap did not act. */
const CONNECTOR_TIMEOUT_MS = 30_000;

type Answer = { kind: 'padded'; bytes: number } | { kind: 'stalled'; declared: number; sent: number };

interface Forward {
  /** Resolves true when the gateway closed the connection before the answer was finished. */
  abortedByGateway: Promise<boolean>;
}

interface TestConnector {
  url: string;
  /** What the next POST /v1/cards is answered with. */
  next: Answer;
  forwards: Forward[];
  close(): Promise<void>;
}

/** A contract card for the request, padded with trailing spaces to exactly `bytes` bytes. */
function paddedCard(request: { cardLimit: number; currency: string }, bytes: number): Buffer {
  const card = JSON.stringify({
    cardId: `card_${randomBytes(12).toString('hex')}`,
    pan: '4000001234567899',
    cvc: '123',
    expMonth: 12,
    expYear: 2030,
    status: 'active',
    cardLimit: request.cardLimit,
    currency: request.currency,
    createdAt: new Date().toISOString(),
  });
  expect(Buffer.byteLength(card)).toBeLessThan(bytes);
  return Buffer.from(card + ' '.repeat(bytes - Buffer.byteLength(card)));
}

async function startTestConnector(): Promise<TestConnector> {
  const connector: TestConnector = { url: '', next: { kind: 'padded', bytes: 512 }, forwards: [], close: async () => undefined };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { cardLimit: number; currency: string };
      const answer = connector.next;
      connector.forwards.push({
        abortedByGateway: new Promise((resolve) => res.once('close', () => resolve(!res.writableFinished))),
      });
      if (answer.kind === 'padded') {
        const body = paddedCard(request, answer.bytes);
        res.writeHead(201, { 'content-type': 'application/json', 'content-length': String(body.length) }).end(body);
        return;
      }
      // Declares a big answer, sends a part of it well past the cap, then never finishes.
      res.writeHead(201, { 'content-type': 'application/json', 'content-length': String(answer.declared) });
      res.write(Buffer.alloc(answer.sent, 0x20));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, INSIDER, resolve));
  connector.url = `http://${INSIDER}:${(server.address() as AddressInfo).port}`;
  connector.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return connector;
}

describe(`connector answers are capped at connector.maxAnswerBytes (${CAP} here)`, () => {
  let connector: TestConnector;
  let listening: CardClientGateway;

  beforeAll(async () => {
    const ca = await testCertificatePem();
    connector = await startTestConnector();
    // One pooled connection: an upstream request left pinned would hold up the next card.
    listening = await listenCardGateway(ca, { url: connector.url, timeoutMs: CONNECTOR_TIMEOUT_MS, connections: 1, maxAnswerBytes: CAP });
  });
  afterAll(async () => {
    await listening?.close();
    await connector?.close();
  });

  const createCard = (): Promise<HttpAnswer> => listening.createCard(CONNECTOR_TIMEOUT_MS + 5000);
  const invalidAnswers = async (): Promise<number> =>
    metricSum((await adminGet(listening.adminUrl, '/metrics')).body, 'gateway_connector_errors_total', { kind: 'invalid_answer' }) ?? 0;

  it('processes an answer of exactly the cap, and answers one byte more with 502 connector_invalid_answer', async () => {
    const before = await invalidAnswers();

    connector.next = { kind: 'padded', bytes: CAP };
    const atCap = await createCard();
    expect(atCap.status, atCap.body).toBe(201);
    const card = JSON.parse(atCap.body) as { cardId: string; pan: string; cardLimit: number; currency: string };
    expect(card).toMatchObject({ pan: '************7899', cardLimit: 10_000, currency: 'EUR' });
    expect(card.cardId).toMatch(/^card_[0-9a-f]{24}$/);
    expect(await invalidAnswers()).toBe(before);

    connector.next = { kind: 'padded', bytes: CAP + 1 };
    const overCap = await createCard();
    expectCodedError(overCap, 502, 'connector_invalid_answer', 'Card processor error');
    expect(await invalidAnswers()).toBe(before + 1);
  });

  it('answers an oversized answer that stalls with 502 at once, aborts the upstream request and frees the connection', async () => {
    const before = await invalidAnswers();
    connector.next = { kind: 'stalled', declared: 64 * CAP, sent: 2 * CAP };
    const forwardsBefore = connector.forwards.length;

    const stalled = await createCard();
    expectCodedError(stalled, 502, 'connector_invalid_answer', 'Card processor error');
    // The cap acted when it was passed: at the connector deadline the answer would be a 504.
    expect(connector.forwards).toHaveLength(forwardsBefore + 1);
    // The stalled answer never finishes by itself: only the gateway closing it settles this.
    expect(await connector.forwards[forwardsBefore]!.abortedByGateway, 'the connector saw the gateway close the unfinished answer').toBe(true);
    expect(await invalidAnswers()).toBe(before + 1);

    // The single pooled connection is free: the next card goes straight through.
    connector.next = { kind: 'padded', bytes: 512 };
    const next = await createCard();
    // A pinned connection would hold it in the queue until the deadline: a 504, not a 201.
    expect(next.status, next.body).toBe(201);
  });
});
