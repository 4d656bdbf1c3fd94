import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { buildGateway } from './app.js';
import { systemClock } from './clock.js';
import { ensureLocalSecrets } from './config/local-secrets.js';
import { loadConfig } from './config/load-config.js';
import { MemoryAuditSink } from './observability/audit.js';
import { createLogger } from './observability/logger.js';
import { MemoryStore } from './store/memory/memory-store.js';

/**
 * `npm run openapi [-- out.json]`: writes the OpenAPI 3 description generated from the route
 * schemas (the same document the admin listener serves at /openapi.json).
 */
const root = join(import.meta.dirname, '..', '..');
const out = resolve(process.argv[2] ?? join(root, 'docs', 'openapi.json'));
await ensureLocalSecrets(join(root, '.local'));
const config = await loadConfig(join(root, 'config', 'local.yaml'), {});
const store = new MemoryStore();
const gateway = await buildGateway({ config, store, clock: systemClock, logger: createLogger('warn'), audit: new MemoryAuditSink(systemClock) });
await gateway.app.ready();
const document = gateway.app.swagger() as { info: { description?: string } };
document.info.description = 'Card issuing gateway public API. Errors use the envelope of spec section 7 (D20).';
await mkdir(dirname(out), { recursive: true });
await writeFile(out, `${JSON.stringify(document, null, 2)}\n`);
await gateway.app.close();
await gateway.admin.close();
await store.close();
process.stdout.write(`wrote ${out}\n`);
