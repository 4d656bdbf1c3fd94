import { Type } from '@sinclair/typebox';

/** Card states (spec 2.2): the connector answers them, the store keeps them, the API returns them. */
export const CARD_STATUSES = ['active', 'canceled', 'inactive'] as const;
export type CardStatus = (typeof CARD_STATUSES)[number];
export const CardStatusSchema = Type.Union(CARD_STATUSES.map((status) => Type.Literal(status)));
