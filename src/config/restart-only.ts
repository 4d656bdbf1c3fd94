import { createHash } from 'node:crypto';
import { ConfigFileSchema, type ConfigFile } from './config-schema.js';
import type { GatewayConfig } from './config-types.js';
import { RELOADABLE_SECTIONS } from './live-settings.js';
import type { SecretReader } from './load-context.js';

const digest = (value: unknown, secrets: Buffer | undefined): string =>
  createHash('sha256')
    .update(JSON.stringify(value ?? null))
    .update(secrets ?? '')
    .digest('base64url')
    .slice(0, 16);

/**
 * Every section the schema knows that a reload does not apply: a digest of its settings and,
 * for the sections with secrets, of the bytes those secrets read (a key rotated in place counts).
 */
export function restartOnlyDigests(root: Readonly<Record<string, unknown>>, secrets: SecretReader): Record<string, string> {
  return Object.fromEntries(
    (Object.keys(ConfigFileSchema.properties) as (keyof ConfigFile)[])
      .filter((section) => !RELOADABLE_SECTIONS.has(section))
      .map((section) => [section, digest(root[section], secrets.digest(section))]),
  );
}

/** Sections whose change a reload cannot apply: they take effect at the next restart. */
export function restartNeeded(running: GatewayConfig, next: GatewayConfig): string[] {
  const sections = new Set([...Object.keys(running.restartOnly), ...Object.keys(next.restartOnly)]);
  return [...sections].filter((section) => running.restartOnly[section] !== next.restartOnly[section]).sort();
}
