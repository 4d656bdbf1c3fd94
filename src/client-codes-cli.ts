import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CLIENT_ERROR_CODES_PATH, renderClientErrorCodes } from './foundation/client-error-codes.js';

/** `npm run generate:client`: writes the client's code table from the error catalogue. */
const out = join(import.meta.dirname, '..', '..', CLIENT_ERROR_CODES_PATH);
await writeFile(out, renderClientErrorCodes());
process.stdout.write(`wrote ${out}\n`);
