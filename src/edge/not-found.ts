import type { FastifyInstance } from 'fastify';
import type { Clock } from '../foundation/clock.js';
import { sendError } from './error-handler.js';
import { errors } from '../foundation/errors.js';

/**
 * Fastify answers a wrong method on a known path with 404; D20 wants 405 with `Allow`. Routes
 * are recorded as they are added, and the not-found handler tells the two cases apart.
 */
export function installNotFound(app: FastifyInstance, clock: Clock): void {
  const methodsByPath = new Map<string, Set<string>>();
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const known = methodsByPath.get(route.url) ?? new Set<string>();
    for (const method of methods) known.add(method);
    methodsByPath.set(route.url, known);
  });
  app.setNotFoundHandler((request, reply) => {
    const query = request.url.indexOf('?');
    const path = query === -1 ? request.url : request.url.slice(0, query);
    const allowed = methodsByPath.get(path);
    if (allowed && !allowed.has(request.method)) return sendError(reply, errors.methodNotAllowed([...allowed].sort().join(', ')), clock);
    return sendError(reply, errors.notFound(), clock);
  });
}
