import { readonlySet } from '../foundation/deep-freeze.js';
import { Type, type Static } from '@sinclair/typebox';
import { Ajv } from 'ajv';
import { compileRanges, type AddressRanges } from '../foundation/address-ranges.js';
import { ConfigError, describeAjvErrors } from './config-error.js';
import { readYamlFile } from './read-yaml-file.js';
import { accept, child, entries, members } from './schema-parts.js';
import { parsePasswordHash, passwordHashFingerprint, unknownUserHash, type ParsedHash } from '../foundation/password-hash.js';

/** Each permission stands alone: none implies another (a credential holds exactly what its entry lists). */
export const PERMISSIONS = ['cards:create', 'cards:reveal', 'cards:read', 'cards:update', 'events:read'] as const;
export type Permission = (typeof PERMISSIONS)[number];

export const CredentialsFileSchema = Type.Object(
  {
    credentials: Type.Array(
      Type.Object(
        {
          id: Type.String({ pattern: '^[A-Za-z0-9._:-]{1,64}$', description: "the credential's id: the subject of its tokens" }),
          username: Type.String({ minLength: 1, maxLength: 128, description: 'what the client logs in with' }),
          passwordHash: Type.String({
            minLength: 1,
            description:
              "scrypt (N=2^14, r=8, p=1, a salt per credential); make it with `npm run hash-password`. A new hash ends the credential's sessions (D41)",
          }),
          issuingAccount: Type.String({ minLength: 1, description: "one of the config's `issuingAccounts`" }),
          permissions: Type.Array(Type.Union(PERMISSIONS.map((p) => Type.Literal(p))), {
            uniqueItems: true,
            description: 'what the credential may do, exactly: none implies another (cards:create, cards:reveal, cards:read, cards:update, events:read)',
          }),
          addressRanges: Type.Array(Type.String(), {
            default: [],
            description: 'CIDRs the credential may be used from; empty means any address the allowlist admits',
          }),
          active: Type.Boolean({
            description: '`false` cuts off its next request of any kind, issued tokens included (D7), and ends its sessions for good (D41)',
          }),
        },
        { additionalProperties: false },
      ),
      { description: 'one entry per API credential' },
    ),
  },
  { additionalProperties: false },
);
type CredentialsFile = Static<typeof CredentialsFileSchema>;

/** One operator-issued API credential, as resolved on every request (D7). */
export interface Credential {
  readonly id: string;
  readonly username: string;
  readonly passwordHash: ParsedHash;
  /** D41: a fingerprint of the hash line (never the hash), carried by tokens and sessions. */
  readonly secretFingerprint: string;
  readonly issuingAccount: string;
  readonly permissions: ReadonlySet<Permission>;
  /** Empty source list: any address the environment allowlist admits. */
  readonly addressRanges: AddressRanges;
  readonly active: boolean;
}

/** D10: a credential with registered ranges is used only from inside them. */
export function admitsAddress(credential: Credential, address: string): boolean {
  return credential.addressRanges.source.length === 0 || credential.addressRanges.contains(address);
}

export interface CredentialDirectory {
  byId(id: string): Credential | undefined;
  byUsername(username: string): Credential | undefined;
  /** Every credential, in the file's order. */
  all(): readonly Credential[];
  readonly size: number;
  /** What an unknown username's password is checked against: a hash at these credentials' usual cost. */
  readonly unknownUserHash: ParsedHash;
}

// verbose: the schema problems' data lets describeAjvErrors hint at YAML's numbers (a numeric id).
const validate = new Ajv({ allErrors: true, useDefaults: true, strict: false, verbose: true }).compile<CredentialsFile>(CredentialsFileSchema);
const ENTRY = CredentialsFileSchema.properties.credentials.items;

/**
 * Reads and checks the credentials file, every problem in one pass (D52): the schema's, and for
 * every entry what can be checked of it even when another of its settings is wrong (its hash,
 * its address ranges, its account, unique id and username). `knownAccounts` are the issuing
 * accounts the main config defines (unknown when that section is unreadable): a credential
 * naming another one is a mistake caught here, not at card time.
 */
export async function loadCredentials(file: string, knownAccounts: ReadonlySet<string> | undefined): Promise<CredentialDirectory> {
  const yaml = await readYamlFile(file);
  const problems: string[] = validate(yaml.data) ? [] : describeAjvErrors(file, validate.errors ?? [], yaml.literal);
  const byId = new Map<string, Credential>();
  const byUsername = new Map<string, Credential>();
  const ids = new Set<string>();
  const usernames = new Set<string>();
  entries(child(yaml.data, 'credentials')).forEach((raw, index) => {
    const at = (field: string) => `${file}: credentials[${index}].${field}`;
    const entry = members(ENTRY, raw);
    let passwordHash: ParsedHash | undefined;
    let addressRanges: AddressRanges | undefined;
    try {
      if (entry.passwordHash !== undefined) passwordHash = parsePasswordHash(entry.passwordHash);
    } catch (error) {
      problems.push(`${at('passwordHash')}: ${(error as Error).message}`);
    }
    try {
      if (entry.addressRanges !== undefined) addressRanges = compileRanges(entry.addressRanges);
    } catch (error) {
      problems.push(`${at('addressRanges')}: ${(error as Error).message}`);
    }
    if (knownAccounts && entry.issuingAccount !== undefined && !knownAccounts.has(entry.issuingAccount))
      problems.push(`${at('issuingAccount')}: "${entry.issuingAccount}" is not in the config's issuingAccounts`);
    if (entry.id !== undefined && ids.has(entry.id)) problems.push(`${at('id')}: duplicate id "${entry.id}"`);
    if (entry.username !== undefined && usernames.has(entry.username)) problems.push(`${at('username')}: duplicate username`);
    if (entry.id !== undefined) ids.add(entry.id);
    if (entry.username !== undefined) usernames.add(entry.username);
    const whole = accept(ENTRY, raw);
    if (!whole || !passwordHash || !addressRanges) return;
    const credential: Credential = Object.freeze({
      id: whole.id,
      username: whole.username,
      // Frozen like the config around it (its salt and hash bytes are Buffers, which cannot be).
      passwordHash: Object.freeze(passwordHash),
      secretFingerprint: passwordHashFingerprint(whole.passwordHash),
      issuingAccount: whole.issuingAccount,
      permissions: readonlySet(whole.permissions),
      addressRanges,
      active: whole.active,
    });
    byId.set(whole.id, credential);
    byUsername.set(whole.username, credential);
  });
  if (problems.length > 0) throw new ConfigError(problems);
  const all = Object.freeze([...byId.values()]);
  return {
    byId: (id) => byId.get(id),
    byUsername: (name) => byUsername.get(name),
    all: () => all,
    size: byId.size,
    unknownUserHash: Object.freeze(unknownUserHash(all.map((credential) => credential.passwordHash))),
  };
}
