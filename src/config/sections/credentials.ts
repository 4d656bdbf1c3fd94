import { resolve } from 'node:path';
import { readonlyMap, readonlySet } from '../../foundation/deep-freeze.js';
import { ConfigFileSchema } from '../config-schema.js';
import type { ResolvedConfig } from '../config-types.js';
import { loadCredentials } from '../credentials-file.js';
import type { SectionContext } from '../load-context.js';
import { accept, isRecord } from '../schema-parts.js';

/** `issuingAccounts`: account -> its enabled currencies. */
export async function loadIssuingAccounts(raw: unknown): Promise<ResolvedConfig['issuingAccounts'] | undefined> {
  const accounts = accept(ConfigFileSchema.properties.issuingAccounts, raw);
  return accounts && readonlyMap(Object.entries(accounts).map(([account, settings]) => [account, readonlySet(settings.currencies)] as const));
}

/**
 * `credentialsFile`: the credentials file, resolved from the config's folder and checked whole;
 * its problems name that file and come in the same pass (D52). The credentials' accounts are
 * checked against the account names `issuingAccounts` has, even when a currency there is wrong.
 */
export async function loadCredentialsFile(
  raw: unknown,
  issuingAccounts: unknown,
  context: SectionContext,
): Promise<Pick<ResolvedConfig, 'credentialsFile' | 'credentials'> | undefined> {
  const name = accept(ConfigFileSchema.properties.credentialsFile, raw);
  if (name === undefined) return undefined;
  const credentialsFile = resolve(context.baseDir, name);
  const knownAccounts = isRecord(issuingAccounts) ? new Set(Object.keys(issuingAccounts)) : undefined;
  const credentials = await context.problems.capture('credentialsFile', () => loadCredentials(credentialsFile, knownAccounts));
  return credentials && { credentialsFile, credentials };
}
