import type { FastifyInstance } from 'fastify';
import type { ModeSetting } from './sandbox-modes.js';
import { SANDBOX_MODES, type SandboxStats } from './sandbox-types.js';
import type { SandboxState } from './sandbox-state.js';

/** `/__control`: set the fault mode, read what reached the connector, forget everything. Tests and benchmarks only. */
export function registerControlRoutes(app: FastifyInstance, state: SandboxState): void {
  app.post<{ Body: ModeSetting }>('/__control/mode', {
    schema: {
      body: {
        type: 'object',
        required: ['mode'],
        additionalProperties: false,
        properties: {
          mode: { type: 'string', enum: [...SANDBOX_MODES] },
          delayMs: { type: 'integer', minimum: 0, maximum: 600_000 },
          status: { type: 'integer', minimum: 400, maximum: 599 },
          count: { type: 'integer', minimum: 1 },
        },
      },
    },
    handler: async (request) => {
      state.modes.set(request.body);
      return { ok: true };
    },
  });

  app.get('/__control/stats', async (): Promise<SandboxStats> => ({
    cardsCreated: state.book.size,
    requestsReceived: state.log.requestsReceived,
    lastHeaders: state.log.lastHeaders,
    lastBody: state.log.lastBody,
    keys: state.book.keys(),
    received: state.log.recent(),
  }));

  app.post('/__control/reset', async () => {
    state.book.clear();
    state.maker.forget();
    state.modes.reset();
    state.log.clear();
    state.outbox.clear();
    return { ok: true };
  });
}
