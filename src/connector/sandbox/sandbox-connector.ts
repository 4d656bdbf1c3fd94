import type { AddressInfo } from 'node:net';
import { bindListener } from '../../foundation/listen-error.js';
import Fastify, { LogController } from 'fastify';
import type { FastifyError, FastifyInstance } from 'fastify';
import { CONNECTOR_PATHS, MAX_CARD_ID_LENGTH } from '../connector-contract.js';
import { CardBook } from './card-book.js';
import { createCardMaker } from './card-maker.js';
import { registerControlRoutes } from './control-routes.js';
import { registerCreationRoute } from './creation-route.js';
import { registerEventControlRoutes } from './event-control-routes.js';
import { EventOutbox, type EventsTarget } from './event-outbox.js';
import { HeldAnswers } from './fault-answers.js';
import { gatewaySecretCheck } from './gateway-secret.js';
import { registerLifecycleRoutes } from './lifecycle-routes.js';
import { closeQuickly } from './quick-close.js';
import { RequestLog } from './request-log.js';
import { SandboxModes } from './sandbox-modes.js';
import type { SandboxState } from './sandbox-state.js';
import type { SandboxConnectorOptions } from './sandbox-types.js';

export { RECEIVED_LOG_SIZE, FOREIGN_ACCOUNT } from './sandbox-types.js';
export type { ReceivedRequest, SandboxCard, SandboxConnectorOptions, SandboxMode, SandboxStats } from './sandbox-types.js';
export type { EventsTarget, OutboxEntry, OutboxAnswer } from './event-outbox.js';

/**
 * Builds the sandbox processor-connector (docs/connector-contract.md): card creation, the
 * lifecycle calls, health, and with `controls` the fault modes and the simulated events. Never
 * listens; see {@link startSandboxConnector}.
 * @throws TypeError when `binPrefix` is not 1..15 digits, or `eventsTarget.url` is not an http(s) base URL.
 */
export function buildSandboxConnector(opts: SandboxConnectorOptions = {}): FastifyInstance {
  return assembleSandbox(opts).app;
}

function assembleSandbox(opts: SandboxConnectorOptions): { app: FastifyInstance; state: SandboxState } {
  const now = opts.now ?? Date.now;
  const state: SandboxState = {
    book: new CardBook(),
    maker: createCardMaker(opts.binPrefix ?? '400000', now),
    modes: new SandboxModes(),
    held: new HeldAnswers(),
    log: new RequestLog(),
    outbox: new EventOutbox(opts.eventsTarget, opts.eventsRetry),
  };
  const secretMatches = gatewaySecretCheck(opts.sharedSecret);

  const app = Fastify({
    logger: opts.logger ?? false,
    logController: new LogController({ disableRequestLogging: true }),
    // A card id is at most the contract's 128 characters (the router measures it decoded): the
    // default of 100 answered ids of 101 to 128 characters with 414, which the gateway counted as
    // connector failures (issue 31, finding 7).
    routerOptions: { maxParamLength: MAX_CARD_ID_LENGTH },
    ...(opts.tls && {
      https: { cert: opts.tls.cert, key: opts.tls.key, ...(opts.tls.ca && { ca: opts.tls.ca, requestCert: true, rejectUnauthorized: true }) },
    }),
  }) as unknown as FastifyInstance;

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const status = typeof error.statusCode === 'number' && error.statusCode >= 400 ? error.statusCode : 500;
    if (status >= 500) request.log.error({ err: { message: error.message } }, 'sandbox connector error');
    return reply.code(status).send({ message: status < 500 ? error.message : 'internal error' });
  });
  // The contract speaks JSON only; Fastify would otherwise accept text/plain bodies too.
  app.removeContentTypeParser('text/plain');
  app.setNotFoundHandler((_request, reply) => reply.code(404).send({ message: 'not found' }));
  closeQuickly(app, opts.tls !== undefined, () => state.held.releaseAll());
  app.addHook('onClose', async () => {
    await state.outbox.close();
  });

  app.get(CONNECTOR_PATHS.health, async (_request, reply) =>
    state.modes.current === 'unhealthy' ? reply.code(503).send({ status: 'unavailable' }) : { status: 'ok' },
  );

  // Every card route: recorded on arrival, then the gateway's secret (mutual TLS is the server's).
  void app.register(async (cards) => {
    cards.addHook('onRequest', async (request, reply) => {
      state.log.arrived(request);
      if (!secretMatches(request)) return reply.code(401).send({ message: 'gateway secret missing or wrong' });
      return undefined;
    });
    registerCreationRoute(cards, state);
    registerLifecycleRoutes(cards, state);
  });

  if (opts.controls === true) {
    registerControlRoutes(app, state);
    registerEventControlRoutes(app, state, now);
  }
  return { app, state };
}

/** A listening sandbox connector. */
export interface RunningSandboxConnector {
  /** Base URL built from the bound address, e.g. `http://127.0.0.1:41234`. */
  url: string;
  close(): Promise<void>;
  app: FastifyInstance;
  /**
   * Where the simulated events go from now on (the gateway's connector listener); undefined
   * holds them until a target is set again.
   * @throws TypeError when the URL is not an http(s) base URL.
   */
  setEventsTarget(target: EventsTarget | undefined): void;
}

/** Builds and starts a sandbox connector; `port: 0` picks a free port. */
export async function startSandboxConnector(options: SandboxConnectorOptions & { host?: string; port?: number } = {}): Promise<RunningSandboxConnector> {
  const { host = '127.0.0.1', port = 0, ...rest } = options;
  const { app, state } = assembleSandbox(rest);
  // A port in use is one line naming it (ListenError), as for the gateway's own listeners.
  await bindListener('sandbox connector', host, port, () => app.listen({ host, port }));
  const address = app.server.address() as AddressInfo;
  const hostPart = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `${rest.tls ? 'https' : 'http'}://${hostPart}:${address.port}`,
    close: () => app.close(),
    app,
    setEventsTarget: (target) => state.outbox.setTarget(target),
  };
}
