import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { subjectKey, type AuthRateLimits, type LimitedAction, type LimitState } from '../auth/auth-rate-limits.js';
import { addressBucket } from '../foundation/address-ranges.js';
import { errors } from '../foundation/errors.js';
import type { Outcome, Outcomes } from '../observability/outcomes.js';
import { rateLimitHeaders } from './rate-limit-headers.js';
import { requestContext, routeOf } from './request-context.js';

/** Whose attempts a limiter counts (D11, D27): the client's address, the submitted username, the credential. */
const SUBJECTS: Record<LimitedAction, (request: FastifyRequest) => string> = {
  loginAddress: (request) => subjectKey(addressBucket(request.clientAddress)),
  login: (request) => subjectKey((request.body as { username: string }).username),
  refresh: (request) => request.principal!.credential.id,
  cardRead: (request) => request.principal!.credential.id,
  cardStatus: (request) => request.principal!.credential.id,
};

const REFUSED: Record<LimitedAction, (request: FastifyRequest) => Outcome> = {
  loginAddress: () => ({ name: 'login.rate_limited', limiter: 'login_address' }),
  login: () => ({ name: 'login.rate_limited', limiter: 'login' }),
  refresh: (request) => ({ name: 'refresh.rate_limited', credential: request.principal!.credential.id }),
  cardRead: (request) => ({ name: 'card.rate_limited', credential: request.principal!.credential.id, limiter: 'card_read' }),
  cardStatus: (request) => ({ name: 'card.rate_limited', credential: request.principal!.credential.id, limiter: 'card_status' }),
};

/**
 * The permission a route declares (D13), checked right after authentication and before the
 * body is read: a refused request costs no parsing and creates nothing. Registered in the
 * protected scope, after the bearer guard.
 */
export function permissionHook(deps: { outcomes: Outcomes }) {
  return function checkPermission(request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void): void {
    const declared = routeOf(request).policy?.permission;
    const credential = request.principal?.credential;
    if (declared === undefined || credential === undefined) return done();
    for (const needed of declared(request)) {
      if (!credential.permissions.has(needed.permission)) {
        // Only card routes declare permissions: their refusals are summarised per credential (D60).
        const cardId = (request.params as { cardId?: unknown } | undefined)?.cardId;
        deps.outcomes.record(
          { name: 'card.refused', credential: credential.id, reason: 'permission_denied', cardId: typeof cardId === 'string' ? cardId : undefined },
          requestContext(request),
        );
        return done(errors.permissionDenied(needed.refusal));
      }
    }
    done();
  };
}

/**
 * Limits whose subject is known before the body is read: applied before it is parsed (D42). The
 * card limits count the credential, known since the bearer guard: a refused status change
 * reads no body.
 */
const BEFORE_BODY: ReadonlySet<LimitedAction> = new Set(['loginAddress', 'cardRead', 'cardStatus']);

/**
 * The rate limits a route declares, in order: those that count the client's address before the
 * body is read (a flood of hostile bodies from one address is refused without parsing any, D42),
 * the others after the body is parsed and validated (a login is counted by its username). Each
 * refusal is a 429; it and a passing request carry the rate-limit headers of every limit the
 * request was counted against (D11, D49).
 */
export function installRateLimits(app: FastifyInstance, deps: { limits: AuthRateLimits; outcomes: Outcomes }): void {
  app.decorateRequest('limitsChecked', undefined);
  /** States of the limits already passed before the body, for the headers of the answer. */
  const early = new WeakMap<FastifyRequest, LimitState[]>();
  const apply = async (request: FastifyRequest, actions: readonly LimitedAction[], states: LimitState[]): Promise<void> => {
    for (const action of actions) {
      const state = await deps.limits.consume(action, SUBJECTS[action](request));
      states.push(state);
      if (state.exceeded) {
        deps.outcomes.record(REFUSED[action](request), { correlationId: request.id, clientAddress: request.clientAddress });
        throw errors.rateLimited(state.reset, rateLimitHeaders(states, state));
      }
    }
  };
  // Callback hooks: routes without limits (card creation) pass without a promise.
  app.addHook('preParsing', (request, _reply, payload, done) => {
    const actions = routeOf(request).policy?.limits?.filter((action) => BEFORE_BODY.has(action));
    if (!actions || actions.length === 0) return done(null, payload);
    const states: LimitState[] = [];
    early.set(request, states);
    apply(request, actions, states).then(
      () => done(null, payload),
      (error: Error) => done(error),
    );
  });
  app.addHook('preHandler', (request, reply, done) => {
    const policy = routeOf(request).policy;
    const declared = policy?.limits;
    if (!declared || declared.length === 0) return done();
    const states = early.get(request) ?? [];
    const checked = apply(
      request,
      declared.filter((action) => !BEFORE_BODY.has(action)),
      states,
    ).then(() => {
      reply.headers(rateLimitHeaders(states));
    });
    if (policy.limitsWithHandler) {
      // Counted now, awaited by the handler beside its own first store calls: one write to the store.
      checked.catch(() => undefined);
      request.limitsChecked = checked;
      return done();
    }
    checked.then(() => done(), done);
  });
}
