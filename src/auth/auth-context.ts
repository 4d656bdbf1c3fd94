import type { Clock } from '../clock.js';
import type { LiveSettings } from '../config/live-settings.js';
import type { GatewayConfig } from '../config/load-config.js';
import type { AuditSink } from '../observability/audit.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import type { GatewayStore } from '../store/store-types.js';
import type { AuthRateLimits } from './auth-rate-limits.js';
import type { ParsedHash } from './password-hash.js';
import type { TokenService } from './token-service.js';

/** What the authentication routes share; built once per gateway instance. */
export interface AuthContext {
  settings: GatewayConfig;
  live: LiveSettings;
  store: GatewayStore;
  clock: Clock;
  audit: AuditSink;
  metrics: GatewayMetrics;
  tokens: TokenService;
  limits: AuthRateLimits;
  /** A real scrypt hash that unknown usernames are checked against (timing). */
  dummyHash: ParsedHash;
}
