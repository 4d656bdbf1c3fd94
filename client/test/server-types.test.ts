import type { Static } from '@sinclair/typebox';
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { SessionTokens as ServerSessionTokens, RefreshedTokens } from '../../src/auth/session-service.js';
import type {
  CardListQuerySchema,
  CardPageSchema,
  CardRecordSchema,
  CardStatusAnswerSchema,
  CardStatusChangedSchema,
  CardStatusSummarySchema,
} from '../../src/cards/card-lifecycle-schemas.js';
import type { CardRequestSchema, CardResponseSchema } from '../../src/cards/card-schemas.js';
import type { SessionTokensSchema } from '../../src/edge/routes/login-route.js';
import { CARD_STATUSES as SERVER_CARD_STATUSES, type CardStatusSchema } from '../../src/foundation/card-status.js';
import type * as ServerEvents from '../../src/foundation/event-types.js';
import { EVENT_TYPES as SERVER_EVENT_TYPES } from '../../src/foundation/event-types.js';
import {
  CARD_STATUSES,
  EVENT_TYPES,
  type Card,
  type CardCreatedData,
  type CardListQuery,
  type CardPage,
  type CardRecord,
  type CardRequest,
  type CardStatus,
  type CardStatusAnswer,
  type CardStatusChanged,
  type CardStatusChangedData,
  type CardStatusSummary,
  type EventCard,
  type EventDataByType,
  type EventSource,
  type EventType,
  type GatewayEvent,
  type Merchant,
  type SessionTokens,
  type TransactionData,
} from '../src/index.js';

/**
 * The client's types are copies of the gateway's schemas (the client must not import the
 * server at run time). These checks keep the copies equal: the type checks fail
 * `npm run typecheck`, the status list fails the test run.
 */

describe("the client's types match the gateway's schemas", () => {
  it('CardRequest, Card and CardStatus are exactly the TypeBox schemas', () => {
    expectTypeOf<CardRequest>().toEqualTypeOf<Static<typeof CardRequestSchema>>();
    expectTypeOf<Card>().toEqualTypeOf<Static<typeof CardResponseSchema>>();
    expectTypeOf<CardStatus>().toEqualTypeOf<Static<typeof CardStatusSchema>>();
  });

  it('CardRecord, CardPage and CardListQuery are exactly the lifecycle schemas (read, list, status change)', () => {
    expectTypeOf<CardRecord>().toEqualTypeOf<Static<typeof CardRecordSchema>>();
    expectTypeOf<CardPage>().toEqualTypeOf<Static<typeof CardPageSchema>>();
    expectTypeOf<CardListQuery>().toEqualTypeOf<Static<typeof CardListQuerySchema>>();
  });

  it("a status change's two answers (D56) are exactly the gateway's", () => {
    expectTypeOf<CardStatusChanged>().toEqualTypeOf<Static<typeof CardStatusChangedSchema>>();
    expectTypeOf<CardStatusSummary>().toEqualTypeOf<Static<typeof CardStatusSummarySchema>>();
    expectTypeOf<CardStatusAnswer>().toEqualTypeOf<Static<typeof CardStatusAnswerSchema>>();
  });

  it("SessionTokens is login's answer with the ID token optional (refresh answers none)", () => {
    // Every login and refresh answer fits the client's type...
    expectTypeOf<Static<typeof SessionTokensSchema>>().toExtend<SessionTokens>();
    expectTypeOf<ServerSessionTokens>().toExtend<SessionTokens>();
    expectTypeOf<RefreshedTokens>().toExtend<SessionTokens>();
    // ...and apart from the ID token's optionality the two are the same fields and types.
    type Settled = { [K in keyof SessionTokens]-?: Exclude<SessionTokens[K], undefined> };
    expectTypeOf<Settled>().toEqualTypeOf<Static<typeof SessionTokensSchema>>();
    expectTypeOf<Omit<SessionTokens, 'idToken' | 'idTokenExpiresAt'>>().toEqualTypeOf<RefreshedTokens>();
  });

  it("lists exactly the gateway's card statuses, in its order", () => {
    expect(CARD_STATUSES).toEqual(SERVER_CARD_STATUSES);
  });

  it("the events (D63) are exactly the gateway's event types, part by part", () => {
    expectTypeOf<GatewayEvent>().toEqualTypeOf<ServerEvents.GatewayEvent>();
    expectTypeOf<EventType>().toEqualTypeOf<ServerEvents.EventType>();
    expectTypeOf<EventSource>().toEqualTypeOf<ServerEvents.EventSource>();
    expectTypeOf<EventCard>().toEqualTypeOf<ServerEvents.EventCard>();
    expectTypeOf<EventDataByType>().toEqualTypeOf<ServerEvents.EventDataByType>();
    expectTypeOf<CardCreatedData>().toEqualTypeOf<ServerEvents.CardCreatedData>();
    expectTypeOf<CardStatusChangedData>().toEqualTypeOf<ServerEvents.CardStatusChangedData>();
    expectTypeOf<TransactionData>().toEqualTypeOf<ServerEvents.TransactionData>();
    expectTypeOf<Merchant>().toEqualTypeOf<ServerEvents.Merchant>();
  });

  it("lists exactly the gateway's event types, in its order", () => {
    expect(EVENT_TYPES).toEqual(SERVER_EVENT_TYPES);
  });
});
