import { Ajv } from 'ajv';
import { describeAjvErrors } from './config-error.js';
import { ConfigFileSchema, type ConfigFile } from './config-schema.js';
import type { Environment } from './config-types.js';
import { applyEnvironmentOverrides } from './environment-overrides.js';
import { readYamlFile } from './read-yaml-file.js';
import { isRecord } from './schema-parts.js';

// verbose: describeAjvErrors reads the schema of a value to word some problems (SecretRef), and
// the value's data to hint at YAML's numbers.
const validateFile = new Ajv({ allErrors: true, useDefaults: true, strict: false, verbose: true }).compile<ConfigFile>(ConfigFileSchema);

/**
 * The config file read and checked against its schema once: every schema problem (an unknown
 * top-level key breaks no section: it is reported and every section still runs), defaults filled
 * in, and the root mapping the sections are read from (none when the file is no mapping).
 */
export async function readConfigFile(
  path: string,
  env: Environment = {},
): Promise<{ root: Readonly<Record<string, unknown>> | undefined; problems: string[]; overrides: string[] }> {
  const yaml = await readYamlFile(path);
  // The environment's listener ports and Redis url first: the schema checks what will be used.
  const { applied, problems: overrideProblems } = applyEnvironmentOverrides(path, yaml.data, env);
  const problems = validateFile(yaml.data) ? [] : describeAjvErrors(path, validateFile.errors ?? [], yaml.literal);
  return { root: isRecord(yaml.data) ? yaml.data : undefined, problems: [...overrideProblems, ...problems], overrides: applied };
}
