import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CONFIG_REFERENCE_PATH, renderConfigReference } from './config/config-reference.js';

/** `npm run generate:config-docs`: writes the configuration reference from the config schemas. */
const out = join(import.meta.dirname, '..', '..', CONFIG_REFERENCE_PATH);
await writeFile(out, renderConfigReference());
process.stdout.write(`wrote ${out}\n`);
