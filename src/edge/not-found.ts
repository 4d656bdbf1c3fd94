import type { FastifyInstance } from 'fastify';
import type { Clock } from '../foundation/clock.js';
import { sendError } from './error-handler.js';
import { labelRoute } from './request-metrics.js';
import { errors } from '../foundation/errors.js';

/** A route path with parameters (`/cards/:cardId`) as a pattern matching its concrete paths (one segment per parameter). */
const parametric = (url: string): RegExp =>
  new RegExp(
    `^${url
      .split('/')
      .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
      .join('/')}$`,
  );

/**
 * Fastify answers a wrong method on a known path with 404; D20 wants 405 with `Allow`. Routes
 * are recorded as they are added (those with parameters as patterns), and the not-found
 * handler tells the two cases apart.
 */
export function installNotFound(app: FastifyInstance, clock: Clock): void {
  const methodsByPath = new Map<string, Set<string>>();
  const patterns: { pattern: RegExp; template: string; methods: Set<string> }[] = [];
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    let known = methodsByPath.get(route.url);
    if (!known) {
      known = new Set<string>();
      methodsByPath.set(route.url, known);
      if (route.url.includes('/:')) patterns.push({ pattern: parametric(route.url), template: route.url, methods: known });
    }
    for (const method of methods) known.add(method);
  });
  app.setNotFoundHandler((request, reply) => {
    const query = request.url.indexOf('?');
    const path = query === -1 ? request.url : request.url.slice(0, query);
    const exact = methodsByPath.get(path);
    const parametricMatch = exact ? undefined : patterns.find(({ pattern }) => pattern.test(path));
    const allowed = exact ?? parametricMatch?.methods;
    if (allowed && !allowed.has(request.method)) {
      // Counted under the route its path belongs to: a template, never the client's path.
      labelRoute(request, parametricMatch?.template ?? path);
      return sendError(reply, errors.methodNotAllowed([...allowed].sort().join(', ')), clock);
    }
    return sendError(reply, errors.notFound(), clock);
  });
}
