import { resolve } from 'node:path';
import { readonlyMap, readonlySet } from '../../foundation/deep-freeze.js';
import { ConfigFileSchema } from '../config-schema.js';
import type { ResolvedConfig } from '../config-types.js';
import { loadCredentials } from '../credentials-file.js';
import { refuseInProduction, type SectionContext } from '../load-context.js';
import { accept, isRecord } from '../schema-parts.js';
import { isShippedHash } from '../shipped-credentials.js';

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
  // D62: the demo credential's hash is public (the README prints its password). It is what a
  // local gateway is for, and an open door anywhere else. Every entry loaded, so `all()` is the
  // file's order.
  if (credentials && context.environment !== 'local' && context.environment !== undefined) {
    credentials.all().forEach((credential, index) => {
      if (!isShippedHash(credential.passwordHash)) return;
      refuseInProduction(
        context,
        `credentials[${index}].passwordHash`,
        "is the demo credential's hash shipped in the repository (config/credentials.local.yaml), whose password anyone can read there; make a new one with npm run hash-password",
        'production refuses unsafe settings',
        credentialsFile,
      );
    });
  }
  return credentials && { credentialsFile, credentials };
}
