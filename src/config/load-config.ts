import { dirname, resolve } from 'node:path';
import { deepFreeze } from '../foundation/deep-freeze.js';
import { systemClock, type Clock } from '../foundation/clock.js';
import { ConfigError } from './config-error.js';
import { readConfigFile } from './config-file.js';
import { ConfigFileSchema } from './config-schema.js';
import type { Environment, GatewayConfig } from './config-types.js';
import { LoadRun, refuseInProduction, SecretReader, type SectionContext } from './load-context.js';
import { unsafeSettings } from './production-guards.js';
import { restartOnlyDigests } from './restart-only.js';
import { accept } from './schema-parts.js';
import { loadCards } from './sections/cards.js';
import { loadConnector } from './sections/connector.js';
import { loadCredentialsFile, loadIssuingAccounts } from './sections/credentials.js';
import { loadEvents } from './sections/events.js';
import { rangesLoader } from './sections/ranges.js';
import { loadAudit, loadEdge, loadListeners, loadLimits, loadLogging, loadPasswordHashing, loadRateLimits, loadShutdown } from './sections/settings.js';
import { loadStore } from './sections/store.js';
import { loadTls } from './sections/tls.js';
import { loadTokens } from './sections/tokens.js';

// The types of loadConfig's signature, for callers that only load.
export type { Environment, GatewayConfig } from './config-types.js';

export interface LoadOptions {
  /** Judges certificate expiry (D51). */
  clock?: Clock;
  /**
   * A reload of a running gateway: an expired certificate is a warning even in production. The
   * listener keeps its certificate until a restart anyway, and refusing the reload would also
   * refuse what it carries (a credential deactivated in an incident).
   */
  forReload?: boolean;
}

/**
 * Reads, validates and resolves one environment's config file. Throws ConfigError listing every
 * problem of the file and its credentials file at once (D40, D52): the schema's, then each
 * section's (secrets readable, keys and certificates parse, ranges, credentials), then the
 * production guards (D32, D50), each section resolving what it can whatever its neighbours hold.
 */
export async function loadConfig(file: string, env: Environment = process.env, options: LoadOptions = {}): Promise<GatewayConfig> {
  const path = resolve(file);
  const { root, problems: schemaProblems, overrides } = await readConfigFile(path, env);
  if (!root) throw new ConfigError(schemaProblems);
  const secrets = new SecretReader(dirname(path), env);
  const environment = accept(ConfigFileSchema.properties.environment, root['environment']);
  const run = new LoadRun(path, secrets, { now: (options.clock ?? systemClock).now(), environment, refuseExpired: !options.forReload }, schemaProblems);
  const { section } = run;
  const sections = {
    environment,
    listeners: await section(loadListeners, root['listeners']),
    trustedProxies: await section(rangesLoader('trustedProxies'), root['trustedProxies']),
    allowlist: await section(rangesLoader('allowlist'), root['allowlist']),
    tls: await section(loadTls, root['tls']),
    edge: await section(loadEdge, root['edge']),
    store: await section(loadStore, root['store']),
    connector: await section(loadConnector, root['connector']),
    rateLimits: await section(loadRateLimits, root['rateLimits']),
    limits: await section(loadLimits, root['limits']),
    passwordHashing: await section(loadPasswordHashing, root['passwordHashing']),
    tokens: await section(loadTokens, root['tokens']),
    issuingAccounts: await section(loadIssuingAccounts, root['issuingAccounts']),
    cards: await section(loadCards, root['cards']),
    credentials: await section((raw, context) => loadCredentialsFile(raw, root['issuingAccounts'], context), root['credentialsFile']),
    events: await section((raw, context) => loadEvents(raw, root['issuingAccounts'], context), root['events']),
    audit: await section(loadAudit, root['audit']),
    logging: await section(loadLogging, root['logging']),
    shutdown: await section(loadShutdown, root['shutdown']),
  };
  // Across sections, once every secret file has been read (their modes are among the guards).
  await section(async (_raw, context) => productionGuards(root, secrets, context), undefined);

  const loaded = complete(sections);
  if (run.problems.length > 0 || !loaded) throw new ConfigError(run.problems.length > 0 ? run.problems : [`${path}: (top level): incomplete configuration`]);
  const { credentials, ...rest } = loaded;
  return deepFreeze({ file: path, ...rest, ...credentials, warnings: run.warnings, overrides, restartOnly: restartOnlyDigests(root, secrets) });
}

/** D32, D50: production refuses what sandbox and local start with and warn about. */
function productionGuards(root: Readonly<Record<string, unknown>>, secrets: SecretReader, context: SectionContext): undefined {
  if (context.environment === undefined) return undefined; // refuse or warn cannot be told: the environment's problem stops the start
  for (const { field, problem, inProduction } of unsafeSettings(root, secrets.privateFiles)) {
    if (inProduction === 'refuse') refuseInProduction(context, field, problem, 'production refuses unsafe settings');
    else context.problems.warn(field, problem);
  }
  return undefined;
}

/** The sections, when every one of them resolved. */
function complete<T extends Record<string, unknown>>(values: T): { [K in keyof T]: NonNullable<T[K]> } | undefined {
  return Object.values(values).every((value) => value !== undefined) ? (values as { [K in keyof T]: NonNullable<T[K]> }) : undefined;
}
