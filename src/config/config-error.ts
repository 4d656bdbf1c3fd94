import type { ErrorObject } from 'ajv';

/**
 * A configuration problem that stops the start (or refuses a reload). Every line reads
 * `file: field: problem`, so an operator can go straight to the mistake.
 */
export class ConfigError extends Error {
  readonly problems: readonly string[];

  constructor(problems: string[]) {
    super(`Invalid configuration:\n  ${problems.join('\n  ')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/** `/tokens/verificationKeys/0/kid` -> `tokens.verificationKeys[0].kid` */
export function fieldPath(pointer: string): string {
  if (pointer === '') return '(top level)';
  return pointer
    .split('/')
    .slice(1)
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((path, part) => (/^\d+$/.test(part) ? `${path}[${part}]` : path ? `${path}.${part}` : part), '');
}

/** `#/.../anyOf/2/const` -> `#/.../anyOf`: the union a literal branch belongs to. */
const LITERAL_BRANCH = /^(.*\/anyOf)\/\d+\/const$/;

/**
 * YAML reads an unquoted `10.1` or `7` as a number. Where the schema wants a string (an address,
 * a kid, an id) the operator meant the text: say so, with the text as the file has it.
 */
function numberWhereStringExpected(error: ErrorObject, literal: (pointer: string) => string | undefined): string | undefined {
  if (error.keyword !== 'type' || error.params['type'] !== 'string' || typeof error.data !== 'number') return undefined;
  const text = literal(error.instancePath) ?? String(error.data);
  return `must be a string; YAML read ${text} as a number: quote it (${JSON.stringify(text)})`;
}

/**
 * `exactly one of { file } or { env }`: the wording for an object that takes exactly one of its
 * members (a secret reference), read from the schema itself so that its `description` is free to
 * say what the setting is (the configuration reference prints it).
 */
function exactlyOne(schema: Record<string, unknown> | undefined): string | undefined {
  const properties = schema?.['properties'];
  if (schema?.['minProperties'] !== 1 || schema['maxProperties'] !== 1 || typeof properties !== 'object' || properties === null) return undefined;
  return `must be exactly one of ${Object.keys(properties)
    .map((name) => `{ ${name} }`)
    .join(' or ')}`;
}

/**
 * One `file: field: problem` line per schema problem. `literal` gives the text of a value as the
 * file has it (errors must come from a validator with `verbose: true`, which hands over the data).
 */
export function describeAjvErrors(file: string, errors: readonly ErrorObject[], literal: (pointer: string) => string | undefined = () => undefined): string[] {
  // TypeBox writes a union of literals as anyOf[{const}...]; Ajv then reports one `const` error
  // per branch plus the `anyOf`. An operator needs one line listing the choices.
  const unionKey = (instancePath: string, unionSchemaPath: string) => `${instancePath}\u0000${unionSchemaPath}`;
  const literalUnions = new Map<string, unknown[]>();
  for (const error of errors) {
    const union = error.keyword === 'const' ? LITERAL_BRANCH.exec(error.schemaPath)?.[1] : undefined;
    if (union === undefined) continue;
    const key = unionKey(error.instancePath, union);
    literalUnions.set(key, [...(literalUnions.get(key) ?? []), error.params['allowedValue']]);
  }
  const seen = new Set<string>();
  const lines: string[] = [];
  for (const error of errors) {
    if (error.keyword === 'const' && LITERAL_BRANCH.test(error.schemaPath)) continue;
    let path = error.instancePath;
    let problem = error.message ?? 'is invalid';
    const choices = error.keyword === 'anyOf' ? literalUnions.get(unionKey(error.instancePath, error.schemaPath)) : undefined;
    const quoteHint = numberWhereStringExpected(error, literal);
    if (quoteHint) {
      problem = quoteHint;
    } else if (choices) {
      problem = `must be one of ${JSON.stringify(choices)}`;
    } else if (error.keyword === 'additionalProperties') {
      path = `${path}/${String(error.params['additionalProperty'])}`;
      problem = 'is not a known setting';
    } else if (error.keyword === 'required') {
      path = `${path}/${String(error.params['missingProperty'])}`;
      problem = 'is required';
    } else if (error.keyword === 'enum' || error.keyword === 'const') {
      const allowed = error.params['allowedValues'] ?? [error.params['allowedValue']];
      problem = `must be one of ${JSON.stringify(allowed)}`;
    } else if (error.keyword === 'minProperties' || error.keyword === 'maxProperties') {
      problem = exactlyOne(error.parentSchema) ?? problem;
    }
    const line = `${file}: ${fieldPath(path)}: ${problem}`;
    if (!seen.has(line)) {
      seen.add(line);
      lines.push(line);
    }
  }
  return lines;
}
