import type { FastifyReply, FastifyRequest } from 'fastify';
import type { CardBook } from './card-book.js';
import type { EventOutbox } from './event-outbox.js';
import type { createCardMaker } from './card-maker.js';
import { abortConnection, sendPartial, type HeldAnswers } from './fault-answers.js';
import type { RequestLog } from './request-log.js';
import type { ModeState, SandboxModes } from './sandbox-modes.js';

/** Everything one sandbox keeps, shared by its route modules. */
export interface SandboxState {
  book: CardBook;
  maker: ReturnType<typeof createCardMaker>;
  modes: SandboxModes;
  held: HeldAnswers;
  log: RequestLog;
  /** Events the control routes simulate, on their way to the gateway's connector listener. */
  outbox: EventOutbox;
}

/** An answer the routes decided on, sent by {@link sendAnswer} under the request's mode. */
export interface Answer {
  status: number;
  body: unknown;
}

/**
 * The faults answered before a request is looked at (`fail`, `reset`, `partial`, `garbage`):
 * true when the reply was taken care of. Nothing is created or changed for them.
 */
export function answeredByFault(request: FastifyRequest, reply: FastifyReply, mode: ModeState, successStatus: number): boolean {
  switch (mode.mode) {
    case 'fail':
      void reply.code(mode.status).send({ message: 'sandbox failure' });
      return true;
    case 'reset':
      abortConnection(request, reply);
      return true;
    case 'partial':
      sendPartial(reply, successStatus);
      return true;
    case 'garbage':
      void reply.code(successStatus).header('content-type', 'application/json; charset=utf-8').send('<<not json>>');
      return true;
    default:
      return false;
  }
}

/** Sends the answer a byte at a time (`drip`), after a wait (`delay`), or at once. */
export async function sendAnswer(state: SandboxState, reply: FastifyReply, mode: ModeState, answer: Answer): Promise<FastifyReply> {
  if (mode.mode === 'drip') {
    state.held.drip(reply, answer.status, answer.body, mode.delayMs);
    return reply;
  }
  if (mode.mode === 'delay') await state.held.wait(mode.delayMs);
  return reply.code(answer.status).send(answer.body);
}
