export { CardGatewayClient } from './client.js';
export type { CallOptions, CardGatewayClientOptions, CreateCardOptions, GetCardOptions } from './options.js';
export type { Operation, RetryEvent } from './scope.js';
export {
  AbortedError,
  ApiError,
  CardGatewayError,
  CertificateError,
  GATEWAY_ERROR_CODES,
  NetworkError,
  RETRYABLE_STATUSES,
  SessionEndedError,
  type CardGatewayErrorInit,
  type ClientErrorCode,
  type ErrorCode,
  type GatewayErrorCode,
  type SessionEndReason,
} from './errors.js';
export type { BackoffOptions, Sleep } from './retry.js';
export type { CaOption, FetchLike, HttpRequestInit, HttpResponseLike } from './transport.js';
export {
  CARD_STATUSES,
  isWholeCard,
  type Card,
  type CardConfig,
  type CardListQuery,
  type CardPage,
  type CardRecord,
  type CardRequest,
  type CardStatus,
  type CardStatusAnswer,
  type CardStatusChanged,
  type CardStatusSummary,
  type CreateCardInput,
  type CreatedCard,
  type SessionTokens,
} from './types.js';
export {
  EVENT_TYPES,
  type CardCreatedData,
  type CardStatusChangedData,
  type EventCard,
  type EventDataByType,
  type EventOfType,
  type EventSource,
  type EventType,
  type GatewayEvent,
  type Merchant,
  type TransactionData,
} from './event-types.js';
export { verifyEvent, WebhookVerificationError, type VerifyEventOptions, type WebhookHeaders, type WebhookVerificationReason } from './events.js';
