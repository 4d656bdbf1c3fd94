import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { TLSSocket } from 'node:tls';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import {
  checkConnectorEvent,
  CONNECTOR_EVENTS_PATH,
  CONNECTOR_SECRET_HEADER,
  connectorEventDraft,
  ConnectorEventSchemas,
  type ConnectorEventDraft,
} from '../connector/connector-events-contract.js';
import type { Clock } from '../foundation/clock.js';
import { errors, toEnvelope, type GatewayError } from '../foundation/errors.js';
import type { RecordedEvent } from '../store/event-store.js';
import { toGatewayError, validationProblems } from './error-handler.js';
import { TLS_CIPHERS } from './listener-hardening.js';
import { parseStrictJson, StrictJsonError, type SchemaNode } from './strict-json.js';

/** What became of one `POST /v1/events` (`gateway_connector_events_total{outcome}`, D64). */
export type ConnectorEventOutcome = 'recorded' | 'repeat' | 'invalid' | 'unauthenticated' | 'unavailable';

/** The parts of the gateway's config (GatewayConfig) the listener reads: the gateway's certificate, the client CA and the connector's secret. */
export interface ConnectorListenerSettings {
  readonly tls: { readonly cert: Buffer; readonly key: Buffer };
  /** With `clientCa`, mutual TLS: only a client certificate signed by it connects. */
  readonly listeners: { readonly connector?: { readonly clientCa?: Buffer | undefined } | undefined };
  /** With `eventsSecret`, every request carries it in `X-Connector-Secret`. */
  readonly connector: { readonly eventsSecret?: string | undefined };
}

export interface ConnectorListenerDeps {
  config: ConnectorListenerSettings;
  /** The event recorder's port: records the draft, or answers the first recording of its dedupe key. */
  record: (draft: ConnectorEventDraft) => Promise<RecordedEvent>;
  logger: Logger;
  metrics: { connectorEvents(outcome: ConnectorEventOutcome): void };
  clock: Clock;
  /** The issuing accounts the config serves now (a reload may change them): a Set, or the config's `issuingAccounts` map. */
  knownAccounts: () => { has(account: string): boolean };
}

/** The largest body the listener reads: one event, its card record included, is a few KiB. */
export const CONNECTOR_EVENT_BODY_LIMIT = 64 * 1024;

/** Deadlines of the listener's connections: one trusted peer, so fixed values do. */
const CONNECTION_LIMITS = { handshakeTimeoutMs: 10_000, headersTimeoutMs: 10_000, requestTimeoutMs: 30_000 } as const;

/**
 * The member names of every type at once, for the strict reader (edge/strict-json.ts): it refuses
 * duplicate names, lossy integers and floods of unknown members before validation, which then
 * checks the body against its own type's schema.
 */
function mergedShape(nodes: readonly SchemaNode[]): SchemaNode {
  const withMembers = nodes.filter((node) => node.properties !== undefined);
  if (withMembers.length === 0) return nodes[0] ?? {};
  const members = new Map<string, SchemaNode[]>();
  for (const node of withMembers) for (const [name, child] of Object.entries(node.properties ?? {})) members.set(name, [...(members.get(name) ?? []), child]);
  return {
    type: 'object',
    properties: Object.fromEntries([...members].map(([name, children]) => [name, mergedShape(children)])),
    additionalProperties: withMembers.every((node) => node.additionalProperties === false) ? false : withMembers[0]?.additionalProperties,
    ...(withMembers[0]?.patternProperties && { patternProperties: withMembers[0].patternProperties }),
  };
}
const BODY_SHAPE = mergedShape(Object.values(ConnectorEventSchemas) as SchemaNode[]);

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

/**
 * Who may post (D64): with a secret configured, a request carrying it; with a client CA, a
 * connection with a certificate it signed (the TLS layer refuses the others already; checked
 * again here). With neither, anyone who reaches the listener's address: local runs only, a
 * production config refuses that.
 */
function authenticator(config: ConnectorListenerSettings): (request: FastifyRequest) => boolean {
  const secret = config.connector.eventsSecret;
  const expected = secret === undefined ? undefined : digest(secret);
  const mutual = config.listeners.connector?.clientCa !== undefined;
  return (request) => {
    if (mutual && (request.raw.socket as TLSSocket).authorized !== true) return false;
    if (expected === undefined) return true;
    const presented = request.headers[CONNECTOR_SECRET_HEADER];
    // Digests first: the comparison takes the same time whatever was presented.
    return typeof presented === 'string' && timingSafeEqual(digest(presented), expected);
  };
}

type Handler = RequestListener<typeof IncomingMessage, typeof ServerResponse>;

/** HTTPS with the gateway's certificate and the API listener's TLS settings (D33); mutual TLS with a client CA. */
function tlsServer(config: ConnectorListenerSettings): (handler: Handler) => HttpsServer {
  const ca = config.listeners.connector?.clientCa;
  return (handler) =>
    createHttpsServer(
      {
        cert: config.tls.cert,
        key: config.tls.key,
        minVersion: 'TLSv1.2',
        ciphers: TLS_CIPHERS,
        honorCipherOrder: true,
        handshakeTimeout: CONNECTION_LIMITS.handshakeTimeoutMs,
        headersTimeout: CONNECTION_LIMITS.headersTimeoutMs,
        requestTimeout: CONNECTION_LIMITS.requestTimeoutMs,
        ...(ca && { ca, requestCert: true, rejectUnauthorized: true }),
      },
      handler,
    );
}

/**
 * The connector listener (D64): `POST /v1/events` and nothing else, on a port of its own. 202
 * with `{ id, sequence }` once the event is recorded, 200 with the first recording's for a
 * repeated `eventId`, 400 with the problems (the connector does not retry it), 401, 503 with
 * `Retry-After` while the store cannot record. Never listens by itself.
 */
export function buildConnectorListener(deps: ConnectorListenerDeps): FastifyInstance {
  const { config, clock, metrics } = deps;
  const authenticated = authenticator(config);
  const logger = deps.logger.child({ listener: 'connector' });

  const app = Fastify({
    serverFactory: tlsServer(config),
    loggerInstance: logger as FastifyBaseLogger,
    childLoggerFactory: (parent) => parent,
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: () => randomUUID(),
    requestIdHeader: false,
    trustProxy: false,
    bodyLimit: CONNECTOR_EVENT_BODY_LIMIT,
    forceCloseConnections: 'idle',
  }) as unknown as FastifyInstance;

  const send = (reply: FastifyReply, error: GatewayError, extra: Record<string, unknown> = {}): FastifyReply => {
    reply.code(error.status).header('x-correlation-id', reply.request.id);
    for (const [name, value] of Object.entries(error.headers)) reply.header(name, value);
    if (error.retryAfter !== undefined) reply.header('retry-after', String(error.retryAfter));
    return reply.type('application/json; charset=utf-8').send({ ...toEnvelope(error, reply.request.id, clock.now()), ...extra });
  };
  /** A 400 lists its problems under `details.fields` like every envelope, and as `problems`, the contract's name. */
  const refuse = (reply: FastifyReply, error: GatewayError): FastifyReply => {
    metrics.connectorEvents('invalid');
    logger.warn({ correlationId: reply.request.id, problems: error.details.fields?.map((field) => field.path) }, 'connector event refused');
    return send(reply, error, error.code === 'validation_failed' ? { problems: error.details.fields ?? [] } : {});
  };

  app.removeContentTypeParser('application/json');
  app.removeContentTypeParser('text/plain');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    if (body === '') return done(errors.emptyBody(), undefined);
    try {
      done(null, parseStrictJson(body as string, BODY_SHAPE));
    } catch (error) {
      done(error instanceof StrictJsonError ? error : errors.malformedJson(), undefined);
    }
  });

  // Before routing and before any body is read: nothing of the listener answers a stranger but 401.
  app.addHook('onRequest', async (request, reply) => {
    if (authenticated(request)) return undefined;
    metrics.connectorEvents('unauthenticated');
    return send(reply, errors.authenticationFailed());
  });

  app.setErrorHandler((error: unknown, request, reply) => {
    const mapped = toGatewayError(error);
    if (mapped.status === 503) metrics.connectorEvents('unavailable');
    else if (mapped.status < 500) return refuse(reply, mapped);
    else
      logger.error(
        { correlationId: request.id, err: error instanceof Error ? { type: error.name, message: error.message } : undefined },
        'connector event failed',
      );
    return send(reply, mapped);
  });

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?', 1)[0];
    return send(reply, path === CONNECTOR_EVENTS_PATH ? errors.methodNotAllowed('POST') : errors.notFound());
  });

  app.post(CONNECTOR_EVENTS_PATH, async (request, reply) => {
    const accounts = deps.knownAccounts();
    const check = checkConnectorEvent(request.body, (account) => accounts.has(account));
    if (!check.ok) {
      const { fields, omitted } = validationProblems(check.problems, 'body');
      return refuse(reply, errors.validation(fields, omitted));
    }
    const recorded = await deps.record(connectorEventDraft(check.event));
    const repeat = recorded.state === 'repeat';
    metrics.connectorEvents(repeat ? 'repeat' : 'recorded');
    return reply
      .code(repeat ? 200 : 202)
      .header('x-correlation-id', request.id)
      .send({ id: recorded.id, sequence: recorded.sequence });
  });

  return app;
}
