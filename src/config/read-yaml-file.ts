import { readFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';
import { ConfigError } from './config-error.js';

/** Parses an operator-edited YAML file; a missing or unparsable one is a ConfigError naming it. */
export async function readYamlFile(file: string): Promise<unknown> {
  try {
    return parseYaml(await readFile(file, 'utf8'));
  } catch (error) {
    const reason =
      (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'file not found' : `cannot be read or parsed (${(error as Error).message.split('\n')[0]})`;
    throw new ConfigError([`${file}: (top level): ${reason}`]);
  }
}
