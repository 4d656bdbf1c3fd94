import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { composeGateway } from './compose.js';
import { prepareLocalSecrets } from './config/local-secrets.js';
import { loadConfig } from './config/load-config.js';
import { systemClock } from './foundation/clock.js';
import { MemoryAuditSink } from './observability/audit.js';
import { createLogger } from './observability/logger.js';
import { MemoryStore } from './store/memory/memory-store.js';

/**
 * `npm run openapi [-- out.json]`: writes the OpenAPI description generated from the route
 * schemas (the same document the admin listener serves at /openapi.json), composed from the
 * local default without a store server, an audit file or a connector.
 */
const root = join(import.meta.dirname, '..', '..');
const out = resolve(process.argv[2] ?? join(root, 'docs', 'openapi.json'));
const localConfig = join(root, 'config', 'local.yaml');
await prepareLocalSecrets(localConfig, (line) => process.stderr.write(`${line}\n`));
const config = await loadConfig(localConfig, {});
const store = new MemoryStore();
const composed = await composeGateway(
  { ...config, connector: { ...config.connector, startSandbox: false } },
  { logger: createLogger('warn'), store, audit: new MemoryAuditSink(systemClock) },
);
const { app, admin } = composed.gateway;
await app.ready();
const document = app.swagger();
await mkdir(dirname(out), { recursive: true });
await writeFile(out, `${JSON.stringify(document, null, 2)}\n`);
await app.close();
await admin.close();
await composed.close();
await store.close();
process.stdout.write(`wrote ${out}\n`);
