import type { EventType } from '../../foundation/event-types.js';
import { EventsSchema } from '../events-schema.js';
import type { SectionContext } from '../load-context.js';
import { refuseInProduction } from '../load-context.js';
import { accept, child, entries, isRecord, members } from '../schema-parts.js';

/** One webhook endpoint, its secrets read. */
export interface EventEndpoint {
  readonly id: string;
  readonly issuingAccount: string;
  readonly url: string;
  /** Undefined: every type. */
  readonly types: readonly EventType[] | undefined;
  /** `whsec_<base64>` values: the first signs, every one is sent. */
  readonly secrets: readonly string[];
  readonly timeoutMs: number;
  readonly maxInFlight: number;
}

export interface EventSettings {
  readonly enabled: boolean;
  readonly retentionDays: number;
  readonly allowPrivateNetworks: boolean;
  readonly pollIntervalMs: number;
  readonly endpoints: readonly EventEndpoint[];
}

const SCHEMA = EventsSchema;
const ENDPOINT = EventsSchema.properties.endpoints.items;
const WHSEC = /^whsec_([A-Za-z0-9+/]+={0,2})$/;

/**
 * `events` (D65): the endpoints with their secrets read and checked (`whsec_` and 24 to 64
 * bytes), each naming a configured issuing account, ids unique; production refuses `http://`.
 */
export async function loadEvents(raw: unknown, rawAccounts: unknown, context: SectionContext): Promise<EventSettings | undefined> {
  const { problems } = context;
  const accounts = isRecord(rawAccounts) ? new Set(Object.keys(rawAccounts)) : undefined;
  const seen = new Set<string>();
  const endpoints: EventEndpoint[] = [];
  const list = entries(child(raw, 'endpoints'));
  for (const [index, entry] of list.entries()) {
    const field = `events.endpoints[${index}]`;
    const { id, issuingAccount, url, secrets: refs } = members(ENDPOINT, entry);
    if (id !== undefined) {
      if (seen.has(id)) problems.add(`${field}.id`, `"${id}" is used by another endpoint; ids are unique`);
      seen.add(id);
    }
    if (issuingAccount !== undefined && accounts && !accounts.has(issuingAccount))
      problems.add(`${field}.issuingAccount`, `"${issuingAccount}" is not one of issuingAccounts`);
    if (url !== undefined) checkUrl(context, `${field}.url`, url);
    const secrets: string[] = [];
    for (const [position, ref] of (refs ?? []).entries()) {
      const secretField = `${field}.secrets[${position}]`;
      const bytes = await context.secret(secretField, ref, 'private');
      if (!bytes) continue;
      const value = bytes.toString('utf8').trim();
      const problem = whsecProblem(value);
      if (problem) problems.add(secretField, `${context.where(ref)}: ${problem}`);
      else secrets.push(value);
    }
    const whole = accept(ENDPOINT, entry);
    if (whole && secrets.length === whole.secrets.length) {
      endpoints.push({
        id: whole.id,
        issuingAccount: whole.issuingAccount,
        url: whole.url,
        types: whole.types,
        secrets,
        timeoutMs: whole.timeoutMs,
        maxInFlight: whole.maxInFlight,
      });
    }
  }
  const settings = accept(SCHEMA, raw ?? {});
  if (!settings) return undefined;
  return {
    enabled: settings.enabled,
    retentionDays: settings.retentionDays,
    allowPrivateNetworks: settings.allowPrivateNetworks,
    pollIntervalMs: settings.pollIntervalMs,
    endpoints,
  };
}

function checkUrl(context: SectionContext, field: string, url: string): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    context.problems.add(field, 'is not a URL');
    return;
  }
  if (parsed.username || parsed.password) context.problems.add(field, 'must not carry credentials (user:password@)');
  if (parsed.hash) context.problems.add(field, 'must not carry a fragment');
  if (parsed.protocol === 'http:')
    refuseInProduction(context, field, 'is http://: events and their signatures would cross the network in clear', 'production delivers over https only (D65)');
}

/** Why a secret is not a Standard Webhooks secret, or undefined. Never quotes the value. */
function whsecProblem(value: string): string | undefined {
  const match = WHSEC.exec(value);
  if (!match) return 'is not a `whsec_<base64>` secret';
  const length = Buffer.from(match[1]!, 'base64').length;
  if (length < 24 || length > 64) return `decodes to ${length} bytes; 24 to 64 are needed`;
  return undefined;
}
