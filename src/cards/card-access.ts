import type { Credential, Permission } from '../config/credentials-file.js';
import { UNKNOWN_CREATOR } from '../store/store-types.js';

/**
 * Who may do what to a card, decided here once (D13, D28, D47: no permission implies another). The route declares the permissions
 * of its operation from `cardPermissions` (checked before the body is read, and audited), the
 * use case checks the same list with `missingPermission` (it takes plain inputs and holds
 * without the edge), and `mayReveal` is the whole reveal rule.
 */

/** A permission an operation needs, and the message its refusal answers. */
export interface PermissionNeed {
  readonly permission: Permission;
  readonly refusal: string;
}

const need = (permission: Permission, refusal = `Permission ${permission} is required`): PermissionNeed => Object.freeze({ permission, refusal });

/** The parameter that asks for full details is named in the refusal: the client can drop it. */
export const REVEAL_NEED = need('cards:reveal', 'Permission cards:reveal is required for revealDetails=true');

/** Each operation's needs, masked and with revealDetails=true; frozen, so a request allocates none. */
const NEEDS = {
  create: { masked: Object.freeze([need('cards:create')]), revealed: Object.freeze([need('cards:create'), REVEAL_NEED]) },
  read: { masked: Object.freeze([need('cards:read')]), revealed: Object.freeze([need('cards:read'), REVEAL_NEED]) },
  // A list is always masked (revealDetails is refused there by its query schema).
  list: { masked: Object.freeze([need('cards:read')]), revealed: Object.freeze([need('cards:read')]) },
  update: { masked: Object.freeze([need('cards:update')]), revealed: Object.freeze([need('cards:update')]) },
} as const;

export type CardOperation = keyof typeof NEEDS;

/** Reading events back (D66): a permission of its own, implied by none of the card ones. */
export const EVENT_READ_NEEDS: readonly PermissionNeed[] = Object.freeze([need('events:read')]);

export const NOT_CREATOR = 'Only the credential that created this card can reveal its details';

/** The permissions `operation` needs, in the order they are checked; `reveal` adds cards:reveal (D13). */
export function cardPermissions(operation: CardOperation, reveal: boolean): readonly PermissionNeed[] {
  return reveal ? NEEDS[operation].revealed : NEEDS[operation].masked;
}

/** The first of `needs` the credential lacks, or undefined when it holds them all. */
export function missingPermission(credential: Credential, needs: readonly PermissionNeed[]): PermissionNeed | undefined {
  for (const needed of needs) if (!credential.permissions.has(needed.permission)) return needed;
  return undefined;
}

/**
 * The reveal rule: full details go only to a credential holding cards:reveal (D13) that created
 * the card (D28), even within one issuing account. A card whose creator the gateway does not
 * know (UNKNOWN_CREATOR: its first attempt was forgotten, D31) reveals to nobody.
 */
export function mayReveal(credential: Credential, creator: string): boolean {
  return credential.permissions.has(REVEAL_NEED.permission) && creator !== UNKNOWN_CREATOR && creator === credential.id;
}
