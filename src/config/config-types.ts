import type { KeyObject } from 'node:crypto';
import type { AddressRanges } from '../foundation/address-ranges.js';
import type { DeepReadonly } from '../foundation/deep-freeze.js';
import type { ConfigFile } from './config-schema.js';
import type { CredentialDirectory } from './credentials-file.js';
import type { EventSettings } from './sections/events.js';
import type { RedisStoreConfig } from './store-config.js';

/** Where `{ env: NAME }` secret references are read from: `process.env` unless a test injects one. */
export type Environment = Readonly<Record<string, string | undefined>>;

export interface VerificationKey {
  kid: string;
  key: KeyObject;
}

/** A card-record key (D37): the id sealed records carry, and 32 bytes for AES-256-GCM. */
export interface CardRecordKey {
  readonly kid: string;
  readonly key: Buffer;
}

/** The API listener's certificate (chain) and key. */
export interface TlsSettings {
  cert: Buffer;
  key: Buffer;
  /** The leaf certificate's notAfter, Unix seconds (parsed once, by the loader). */
  certificateExpiresAt: number;
}

export type ConnectorSettings = Omit<ConfigFile['connector'], 'tls' | 'sharedSecret' | 'eventsSecret'> & {
  tls:
    | {
        ca?: Buffer;
        cert?: Buffer;
        key?: Buffer;
        /** With a client certificate: its leaf's notAfter, Unix seconds (D51). */
        certificateExpiresAt?: number;
      }
    | undefined;
  sharedSecret: string | undefined;
  /** `X-Connector-Secret` the connector sends with its events (D64). */
  eventsSecret?: string | undefined;
};

/** The listeners, the connector listener's client CA read (D64). */
export type ListenerSettings = Omit<ConfigFile['listeners'], 'connector'> & {
  connector: (Omit<NonNullable<ConfigFile['listeners']['connector']>, 'clientCa'> & { clientCa: Buffer | undefined }) | undefined;
};

export type TokenSettings = Omit<ConfigFile['tokens'], 'signingKey' | 'verificationKeys'> & {
  signingKey: { kid: string; key: KeyObject };
  /** The signing key's public half first, then the listed (older or upcoming) keys. */
  verificationKeys: VerificationKey[];
};

export type CardSettings = Omit<ConfigFile['cards'], 'encryptionKey' | 'previousEncryptionKeys'> & {
  encryptionKey: CardRecordKey;
  previousEncryptionKeys: CardRecordKey[];
};

/**
 * Everything the gateway needs, checked and with secrets resolved, before it is frozen: the
 * file's own sections as the schema types them, except where a secret reference became its
 * value or a list became a compiled matcher.
 */
export interface ResolvedConfig {
  file: string;
  environment: ConfigFile['environment'];
  listeners: ListenerSettings;
  tls: TlsSettings;
  edge: ConfigFile['edge'];
  trustedProxies: AddressRanges;
  allowlist: AddressRanges;
  store: { kind: 'memory' } | RedisStoreConfig;
  connector: ConnectorSettings;
  rateLimits: ConfigFile['rateLimits'];
  limits: ConfigFile['limits'];
  passwordHashing: Required<ConfigFile['passwordHashing']>;
  tokens: TokenSettings;
  credentialsFile: string;
  credentials: CredentialDirectory;
  /** Issuing account -> enabled ISO 4217 currencies. */
  issuingAccounts: ReadonlyMap<string, ReadonlySet<string>>;
  cards: CardSettings;
  audit: ConfigFile['audit'];
  events: EventSettings;
  logging: ConfigFile['logging'];
  shutdown: ConfigFile['shutdown'];
  /** Unsafe settings tolerated outside production (D32) and certificates near their end (D51): logged as warnings. */
  warnings: string[];
  /** Settings taken from the environment (environment-overrides.ts), as `field from VARIABLE`. */
  overrides: string[];
  /** A digest per section that only a restart applies; a reload names the ones that changed. */
  restartOnly: Record<string, string>;
}

/** The loaded config, deep-frozen. */
export type GatewayConfig = DeepReadonly<ResolvedConfig>;
