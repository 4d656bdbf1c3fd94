import type { Environment } from './config-types.js';
import { isRecord } from './schema-parts.js';

/**
 * The settings a deployment changes most often without changing anything else: where the
 * listeners bind and where Redis is. Each can be set from an environment variable, the same way
 * in every environment, so that a config file (and its relative paths) is used as it is on
 * another host, in a container or beside a port that is taken. An unset or empty variable
 * changes nothing. Nothing else is read from the environment but `{ env: ... }` secrets.
 */
export const ENVIRONMENT_OVERRIDES = [
  { variable: 'GATEWAY_HTTPS_PORT', field: 'listeners.https.port', path: ['listeners', 'https', 'port'], kind: 'port' },
  { variable: 'GATEWAY_PLAIN_HTTP_PORT', field: 'listeners.plainHttp.port', path: ['listeners', 'plainHttp', 'port'], kind: 'port' },
  { variable: 'GATEWAY_ADMIN_PORT', field: 'listeners.admin.port', path: ['listeners', 'admin', 'port'], kind: 'port' },
  { variable: 'GATEWAY_REDIS_URL', field: 'store.redis.url', path: ['store', 'redis', 'url'], kind: 'redis-url' },
] as const;

export interface AppliedOverrides {
  /** `field from VARIABLE`, for the start's log line and the check's output. */
  readonly applied: string[];
  /** `file: field: problem` lines: a value that is not one, or a setting the file does not have. */
  readonly problems: string[];
}

/** What stands in the way of `kind`'s override in the file as read, if anything. */
function obstacle(data: Record<string, unknown>, override: (typeof ENVIRONMENT_OVERRIDES)[number]): string | undefined {
  const [section, member] = override.path;
  const parent = data[section];
  if (override.kind === 'port') {
    return isRecord(parent) && isRecord(parent[member]) ? undefined : `the config has no ${section}.${member} to set the port of`;
  }
  const store = isRecord(parent) ? parent : {};
  if (store['kind'] !== 'redis' || !isRecord(store['redis'])) return `store.kind is ${JSON.stringify(store['kind'] ?? null)}, not redis`;
  const topology = ['sentinel', 'cluster'].find((key) => store['redis'] !== undefined && (store['redis'] as Record<string, unknown>)[key] !== undefined);
  return topology === undefined ? undefined : `store.redis uses ${topology}: its nodes are in the config, not in a url`;
}

/** The value to write, or the problem with the variable's text. */
function parse(text: string, kind: (typeof ENVIRONMENT_OVERRIDES)[number]['kind']): { value: number | string } | { problem: string } {
  if (kind === 'port') {
    return /^\d{1,5}$/.test(text) && Number(text) <= 65_535 ? { value: Number(text) } : { problem: 'is not a port number (0 to 65535)' };
  }
  return /^rediss?:\/\//.test(text) ? { value: text } : { problem: 'is not a redis:// or rediss:// url' };
}

/**
 * Writes the overrides `env` sets into the file's data before its schema check, so that every
 * check (schema, production guards, the reload's restart-only comparison) sees the values the
 * gateway will use. A problem names the file, the field and the variable; the value of
 * GATEWAY_REDIS_URL is never repeated (it may carry a password, which production refuses anyway).
 */
export function applyEnvironmentOverrides(file: string, data: unknown, env: Environment): AppliedOverrides {
  const applied: string[] = [];
  const problems: string[] = [];
  if (!isRecord(data)) return { applied, problems };
  for (const override of ENVIRONMENT_OVERRIDES) {
    const text = env[override.variable];
    if (text === undefined || text === '') continue;
    const shown = override.kind === 'port' ? `${override.variable}=${text}` : override.variable;
    const parsed = parse(text, override.kind);
    if ('problem' in parsed) {
      problems.push(`${file}: ${override.field}: ${shown} ${parsed.problem}`);
      continue;
    }
    const blocked = obstacle(data, override);
    if (blocked !== undefined) {
      problems.push(`${file}: ${override.field}: ${override.variable} is set, but ${blocked}`);
      continue;
    }
    const [section, member, key] = override.path;
    ((data[section] as Record<string, unknown>)[member] as Record<string, unknown>)[key] = parsed.value;
    applied.push(`${override.field} from ${override.variable}`);
  }
  return { applied, problems };
}
