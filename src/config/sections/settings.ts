import { resolve } from 'node:path';
import { ConfigFileSchema } from '../config-schema.js';
import type { ResolvedConfig } from '../config-types.js';
import type { SectionContext } from '../load-context.js';
import { parseCertificates } from '../certificates.js';
import { accept, child } from '../schema-parts.js';

/**
 * The sections that are settings only (no file to read, nothing to resolve): each is what the
 * schema accepted, with its defaults; the schema check has reported anything else.
 */

const SCHEMA = ConfigFileSchema.properties;

/** `listeners`: the connector listener's client CA read (mutual TLS, D64). */
export async function loadListeners(raw: unknown, context: SectionContext): Promise<ResolvedConfig['listeners'] | undefined> {
  const clientCaRef = accept(SCHEMA.listeners.properties.connector, child(raw, 'connector'))?.clientCa;
  const clientCa = await context.secret('listeners.connector.clientCa', clientCaRef, 'public');
  if (clientCa) await context.problems.capture('listeners.connector.clientCa', () => parseCertificates(clientCa));
  const listeners = accept(SCHEMA.listeners, raw);
  if (!listeners) return undefined;
  const { connector, ...rest } = listeners;
  return { ...rest, connector: connector && { host: connector.host, port: connector.port, clientCa } };
}
export const loadEdge = async (raw: unknown): Promise<ResolvedConfig['edge'] | undefined> => accept(SCHEMA.edge, raw);
export const loadRateLimits = async (raw: unknown): Promise<ResolvedConfig['rateLimits'] | undefined> => accept(SCHEMA.rateLimits, raw);
export const loadLimits = async (raw: unknown): Promise<ResolvedConfig['limits'] | undefined> => accept(SCHEMA.limits, raw);
export const loadShutdown = async (raw: unknown): Promise<ResolvedConfig['shutdown'] | undefined> => accept(SCHEMA.shutdown, raw);
export const loadLogging = async (raw: unknown): Promise<ResolvedConfig['logging'] | undefined> => accept(SCHEMA.logging, raw);

/** `audit`: its file resolved from the config file's folder. */
export async function loadAudit(raw: unknown, context: SectionContext): Promise<ResolvedConfig['audit'] | undefined> {
  const audit = accept(SCHEMA.audit, raw);
  return audit && { ...audit, file: resolve(context.baseDir, audit.file) };
}

/** libuv's thread pool size: scrypt runs there, so more concurrent hashes than this only queue. */
const threadPoolSize = (): number => {
  const configured = Number(process.env['UV_THREADPOOL_SIZE']);
  return Number.isInteger(configured) && configured > 0 ? configured : 4;
};

/** `passwordHashing` (D27): unset bounds follow the thread pool, half of it per client address. */
export async function loadPasswordHashing(raw: unknown): Promise<ResolvedConfig['passwordHashing'] | undefined> {
  const settings = accept(SCHEMA.passwordHashing, raw);
  if (!settings) return undefined;
  const maxConcurrent = settings.maxConcurrent ?? threadPoolSize();
  return { maxConcurrent, maxConcurrentPerAddress: settings.maxConcurrentPerAddress ?? Math.max(1, Math.floor(maxConcurrent / 2)) };
}
