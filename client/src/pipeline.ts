/**
 * The one request pipeline every operation runs on: per attempt, the access token (refreshed
 * when due), the request sent, the answer read as the operation's result or mapped to a typed
 * error; around the attempts, the retry policy. An operation declares only what differs
 * (operations.ts); a listing runs one declaration per page (client.ts).
 */
import { apiError, invalidResponse, type Answer } from './answer.js';
import type { ApiError, CardGatewayError } from './errors.js';
import type { Settings } from './options.js';
import { withRetries } from './retry.js';
import type { CallScope } from './scope.js';
import type { Request, Sender } from './send.js';

export interface OperationSpec<T> {
  /** The access token to send, asked before every attempt (refreshed when due); none for login. */
  bearer?: (() => Promise<string>) | undefined;
  /** The attempt's request, made after `bearer`: it may read what a refresh on the way changed. */
  request: () => Request;
  /** The statuses that are the operation's success. */
  success: readonly number[];
  /** The result of a success answer; undefined when the body does not have the documented shape. */
  read: (answer: Answer, attempt: number) => T | undefined;
  /**
   * Whether a success answer of the wrong shape is worth another attempt: yes where a repeat
   * answers the same thing again (createCard with its requestId), no where it does something
   * again (another login is another session). Default no.
   */
  retryInvalid?: boolean | undefined;
  /** What an error answer becomes, given the token it was sent with (a 401 may end the session). Default the ApiError. */
  refused?: ((error: ApiError, bearer: string | undefined) => CardGatewayError) | undefined;
}

export class Pipeline {
  readonly #settings: Settings;
  readonly #sender: Sender;

  constructor(settings: Settings, sender: Sender) {
    this.#settings = settings;
    this.#sender = sender;
  }

  /** Runs `spec` within `scope` (its deadline, signal and requestId), retried as the policy says. */
  run<T>(scope: CallScope, spec: OperationSpec<T>): Promise<T> {
    return withRetries(this.#settings, scope, async (attempt) => {
      const bearer = spec.bearer ? await spec.bearer() : undefined;
      const label = { operation: scope.operation, attempt, requestId: scope.requestId };
      const answer = await this.#sender.send(spec.request(), { ...label, deadlineAt: scope.deadlineAt, signal: scope.signal, bearer });
      if (spec.success.includes(answer.status)) {
        const result = spec.read(answer, attempt);
        if (result === undefined) throw invalidResponse(answer, label, spec.retryInvalid === true);
        return result;
      }
      const error = apiError(answer, label, this.#settings.now());
      throw spec.refused ? spec.refused(error, bearer) : error;
    });
  }
}
