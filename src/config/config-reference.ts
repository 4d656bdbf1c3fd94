import { posix } from 'node:path';
import type { TSchema } from '@sinclair/typebox';
import { ConfigFileSchema } from './config-schema.js';
import { CredentialsFileSchema } from './credentials-file.js';
import { ENVIRONMENT_OVERRIDES } from './environment-overrides.js';

/** Where the configuration reference lives, from the repository's root. */
export const CONFIG_REFERENCE_PATH = 'docs/configuration.md';

/**
 * The configuration reference, as Markdown, generated from the schemas the loader checks files
 * against (`npm run generate:config-docs`), so that the manual cannot drift from the code: every
 * setting with its type, bounds, default and the schema's own `description`. A test regenerates
 * it and compares.
 */

interface Row {
  readonly setting: string;
  readonly type: string;
  readonly default: string;
  readonly meaning: string;
}

type Schema = TSchema & Record<string, unknown>;

const isSchema = (value: unknown): value is Schema => typeof value === 'object' && value !== null;
const code = (text: string): string => `\`${text}\``;
/** A table cell: one line, no column break. */
const cell = (text: string): string => text.replace(/\s+/g, ' ').replace(/\|/g, '\\|').trim();

/** A secret reference: exactly one of `{ file }` or `{ env }` (config-schema.ts, `Secret`). */
function isSecretRef(schema: Schema): boolean {
  const properties = schema['properties'];
  return isSchema(properties) && schema['maxProperties'] === 1 && 'file' in properties && 'env' in properties;
}

const literals = (schema: Schema): unknown[] | undefined => {
  const branches = schema['anyOf'];
  if (!Array.isArray(branches) || !branches.every((branch) => isSchema(branch) && 'const' in branch)) return undefined;
  return branches.map((branch: Schema) => branch['const']);
};

function bounds(schema: Schema, unit: string): string {
  const { minimum, maximum } = schema as { minimum?: number; maximum?: number };
  if (minimum !== undefined && maximum !== undefined) return `${unit} ${minimum} to ${maximum}`;
  if (minimum !== undefined) return `${unit} ≥ ${minimum}`;
  if (maximum !== undefined) return `${unit} ≤ ${maximum}`;
  return unit;
}

function typeOf(schema: Schema): string {
  if (isSecretRef(schema)) return 'secret ref';
  const choices = literals(schema);
  if (choices) return `one of ${choices.map((choice) => code(String(choice))).join(', ')}`;
  switch (schema['type']) {
    case 'integer':
      return bounds(schema, 'integer');
    case 'number':
      return bounds(schema, 'number');
    case 'boolean':
      return 'boolean';
    case 'string':
      return schema['description'] === 'host:port' ? code('host:port') : 'string';
    case 'array':
      return isSchema(schema['items']) ? `list of ${typeOf(schema['items'])}` : 'list';
    case 'object':
      return isSchema(schema['patternProperties']) ? 'map by name' : 'object';
    default:
      return 'value';
  }
}

function defaultOf(schema: Schema, required: boolean): string {
  const value = schema['default'];
  if (value !== undefined) {
    if (typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length === 0) return "its settings' defaults";
    return code(JSON.stringify(value));
  }
  return required ? '**required**' : 'none';
}

/**
 * The schema's description; a list of secret references is one setting, so what each secret is
 * (its own description) is said there too.
 */
function meaningOf(schema: Schema): string {
  const meaning = String(schema['description'] ?? '');
  const items = schema['items'];
  if (schema['type'] !== 'array' || !isSchema(items) || !isSecretRef(items) || typeof items['description'] !== 'string') return meaning;
  return meaning === '' ? `each ${items['description']}` : `each ${items['description']}; ${meaning}`;
}

/** Rows for `schema` at `path` and every setting below it; a secret reference is one setting. */
function rows(schema: Schema, path: string, required: boolean): Row[] {
  const items = schema['items'];
  const row: Row = { setting: code(path), type: typeOf(schema), default: defaultOf(schema, required), meaning: meaningOf(schema) };
  if (isSecretRef(schema)) return [row];
  if (schema['type'] === 'array' && isSchema(items) && items['type'] === 'object' && !isSecretRef(items)) return [row, ...children(items, `${path}[]`)];
  const pattern = schema['patternProperties'];
  if (isSchema(pattern)) {
    const value = Object.values(pattern)[0];
    return isSchema(value) ? [row, ...children(value, `${path}.<name>`)] : [row];
  }
  if (schema['type'] === 'object') return [row, ...children(schema, path)];
  return [row];
}

function children(schema: Schema, path: string): Row[] {
  const properties = schema['properties'];
  if (!isSchema(properties)) return [];
  const required = new Set(Array.isArray(schema['required']) ? (schema['required'] as string[]) : []);
  return Object.entries(properties).flatMap(([name, child]) => (isSchema(child) ? rows(child, path ? `${path}.${name}` : name, required.has(name)) : []));
}

function table(entries: readonly Row[]): string[] {
  return [
    '| setting | type | default | meaning |',
    '|---|---|---|---|',
    ...entries.map((row) => `| ${cell(row.setting)} | ${cell(row.type)} | ${cell(row.default)} | ${cell(row.meaning)} |`),
  ];
}

/** One section per top-level setting of a file. */
function sections(schema: Schema, level: string): string[] {
  const required = new Set(Array.isArray(schema['required']) ? (schema['required'] as string[]) : []);
  const properties = isSchema(schema['properties']) ? schema['properties'] : {};
  return Object.entries(properties).flatMap(([name, child]) =>
    isSchema(child) ? [`${level} \`${name}\``, '', ...table(rows(child, name, required.has(name))), ''] : [],
  );
}

const PREAMBLE = `<!-- Generated from src/config/config-schema.ts and src/config/credentials-file.ts by
\`npm run generate:config-docs\`. Do not edit: change the schemas' descriptions and regenerate
(test/config/config-reference.test.ts fails when this file is stale). -->

# Configuration reference

One YAML file per environment (comments allowed). [\`config/local.yaml\`](../config/local.yaml) is
the embedded default that \`npm start\` runs; [\`config/sandbox.yaml\`](../config/sandbox.yaml) and
[\`config/production.yaml\`](../config/production.yaml) are deployment examples. Relative paths are
resolved from the config file's folder.

**Secrets never appear in these files.** Every setting of type *secret ref* names where its
secret lives: \`{ file: /run/secrets/x }\` or \`{ env: VARIABLE }\`, exactly one of the two.

**From the environment.** ${ENVIRONMENT_OVERRIDES.map(({ variable, field }) => `\`${variable}\` replaces \`${field}\``).join(', ')}, in every
environment (an unset or empty variable changes nothing; see "Running" in the
[operations guide](operations.md#running)). Nothing else is read from the environment.

**Every problem at once.** A wrong config stops the start (exit code 78) with one line per
problem, all in one pass: a mistake in one setting does not hide the problems of its neighbours,
in its section or elsewhere (D40, D52). \`node dist/src/main.js --check-config FILE\` checks a
config and its credentials file the same way without starting.

\`\`\`
Invalid configuration:
  /etc/card-gateway/gateway.yaml: listeners.https.prot: is not a known setting
  /etc/card-gateway/gateway.yaml: allowlist[1]: "127.1" is not a four-part decimal IPv4 address or range
  /etc/card-gateway/gateway.yaml: allowlist[2]: must be a string; YAML read 10.1 as a number: quote it ("10.1")
  /etc/card-gateway/credentials.yaml: credentials[0].issuingAccount: "acct-x" is not in the config's issuingAccounts
\`\`\`

What production refuses, which settings a reload applies and which need a restart: see the
[operations guide](operations.md#production-refuses-unsafe-settings). In the tables, \`a.b[]\` is
each entry of the list \`a.b\`, and \`a.<name>\` each member of the map \`a\`.
`;

/** A link from a page of docs/ to a file named from the repository's root. */
const fromDocs = (path: string): string => posix.relative('docs', path);

const CREDENTIALS = `## The credentials file

Named by \`credentialsFile\`, edited by operators, reloaded without a restart
([example](../config/credentials.example.yaml); onboarding and deactivating: the
[credentials runbook](${fromDocs('docs/runbooks/credentials.md')})).
`;

export function renderConfigReference(): string {
  const lines = [
    PREAMBLE,
    '## The config file',
    '',
    ...sections(ConfigFileSchema as Schema, '###'),
    CREDENTIALS,
    ...table(children(CredentialsFileSchema as Schema, '')),
  ];
  return `${lines.join('\n').trimEnd()}\n`;
}
