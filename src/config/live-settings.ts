import type { CredentialDirectory } from './credentials-file.js';
import type { AddressRanges } from '../foundation/address-ranges.js';
import type { ConfigFile } from './config-schema.js';
import type { GatewayConfig } from './config-types.js';

/** The parts of the config that a reload (SIGHUP, D22) replaces while the gateway runs. */
export interface LiveSnapshot {
  readonly allowlist: AddressRanges;
  readonly trustedProxies: AddressRanges;
  readonly credentials: CredentialDirectory;
  readonly issuingAccounts: ReadonlyMap<string, ReadonlySet<string>>;
}

/**
 * The config file's sections a reload applies at once (D22), written here only: the snapshot
 * below carries them (`credentialsFile` as the credentials read from it, a new path included),
 * the loader digests every other section as restart-only, and the reload's log line lists these
 * as `applied`.
 */
export const RELOADABLE_SECTIONS: ReadonlySet<keyof ConfigFile> = new Set([
  'allowlist',
  // Read by the production guards (D62) as the allowlist they judge is loaded: it applies with it.
  'allowlistWideRangesAllowed',
  'trustedProxies',
  'credentialsFile',
  'issuingAccounts',
  // Webhook endpoints and their secrets, retention, delivery settings (D65): events/install-events.ts.
  'events',
] as const);

/**
 * Holds the current snapshot. Requests read `current` once and use that object throughout, so
 * a reload never mixes an old allowlist with new credentials inside one request.
 */
export class LiveSettings {
  #current: LiveSnapshot;

  constructor(config: GatewayConfig) {
    this.#current = LiveSettings.snapshot(config);
  }

  static snapshot(config: GatewayConfig): LiveSnapshot {
    return Object.freeze({
      allowlist: config.allowlist,
      trustedProxies: config.trustedProxies,
      credentials: config.credentials,
      issuingAccounts: config.issuingAccounts,
    });
  }

  get current(): LiveSnapshot {
    return this.#current;
  }

  apply(config: GatewayConfig): void {
    this.#current = LiveSettings.snapshot(config);
  }
}
