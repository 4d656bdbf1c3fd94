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

export function describeAjvErrors(file: string, errors: readonly ErrorObject[]): string[] {
  const seen = new Set<string>();
  const lines: string[] = [];
  for (const error of errors) {
    let path = error.instancePath;
    let problem = error.message ?? 'is invalid';
    if (error.keyword === 'additionalProperties') {
      path = `${path}/${String(error.params['additionalProperty'])}`;
      problem = 'is not a known setting';
    } else if (error.keyword === 'required') {
      path = `${path}/${String(error.params['missingProperty'])}`;
      problem = 'is required';
    } else if (error.keyword === 'enum' || error.keyword === 'const') {
      const allowed = error.params['allowedValues'] ?? [error.params['allowedValue']];
      problem = `must be one of ${JSON.stringify(allowed)}`;
    } else if (error.keyword === 'minProperties' || error.keyword === 'maxProperties') {
      problem = error.parentSchema?.['description'] ? `must be ${String(error.parentSchema['description'])}` : problem;
    }
    const line = `${file}: ${fieldPath(path)}: ${problem}`;
    if (!seen.has(line)) {
      seen.add(line);
      lines.push(line);
    }
  }
  return lines;
}
