import { readFile } from 'node:fs/promises';
import { isScalar, parseDocument } from 'yaml';
import { ConfigError } from './config-error.js';

/** An operator-edited YAML file, parsed. */
export interface YamlFile {
  readonly data: unknown;
  /** The text a scalar has in the file, at a JSON pointer (`/allowlist/0`), for messages. */
  literal(pointer: string): string | undefined;
}

/** Parses an operator-edited YAML file; a missing or unparsable one is a ConfigError naming it. */
export async function readYamlFile(file: string): Promise<YamlFile> {
  try {
    const text = await readFile(file, 'utf8');
    // What yaml's parse() does, keeping the document: its nodes know where their text is.
    const document = parseDocument(text);
    for (const warning of document.warnings) process.emitWarning(warning);
    if (document.errors.length > 0) throw document.errors[0];
    return {
      data: document.toJS(),
      literal: (pointer) => {
        const path = pointer
          .split('/')
          .slice(1)
          .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'));
        const node = path.length > 0 ? document.getIn(path, true) : undefined;
        return isScalar(node) && node.range ? text.slice(node.range[0], node.range[1]) : undefined;
      },
    };
  } catch (error) {
    const reason =
      (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'file not found' : `cannot be read or parsed (${(error as Error).message.split('\n')[0]})`;
    throw new ConfigError([`${file}: (top level): ${reason}`]);
  }
}
