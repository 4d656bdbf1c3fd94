import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { verifyEvent, WebhookVerificationError } from '../../client/src/index.js';
import { ListenError } from '../../src/foundation/listen-error.js';
import { createReceiver } from './receiver.js';

const DEFAULT_PORT = 9800;
const DEFAULT_SECRET_FILE = 'config/.local/events-webhook.secret';
const HOST = '127.0.0.1';

const USAGE = `Usage: npm run events:listen -- [--port N] [--secret-file FILE]

Receives the gateway's webhook deliveries on http://${HOST}:N/ (any path), verifies each one's
signature and prints one line per event:
  <createdAt> <type> <id> card=<cardId> seq=<sequence> status=... | amount=... currency=...
Answers 204 to a verified delivery and 401 to a refused one (the line says why).

  --port N             the port to listen on (default ${DEFAULT_PORT}; 0: any free port)
  --secret-file FILE   the endpoint's secret, whsec_..., one per line during a rotation
                       (default ${DEFAULT_SECRET_FILE})
  --help               print this text

Exit codes: 0 stopped by SIGINT or SIGTERM, 2 could not start.
`;

/** Why the receiver cannot start, on stderr; exit 2. */
function fail(message: string): never {
  process.stderr.write(`events:listen: ${message}\n`);
  process.exit(2);
}

function options(): { port: number; secretFile: string } {
  let values: { port?: string | undefined; 'secret-file'?: string | undefined; help?: boolean | undefined };
  try {
    ({ values } = parseArgs({ options: { port: { type: 'string' }, 'secret-file': { type: 'string' }, help: { type: 'boolean', short: 'h' } } }));
  } catch (error) {
    fail(`${(error as Error).message}\n\n${USAGE}`);
  }
  if (values.help === true) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  const port = values.port === undefined ? DEFAULT_PORT : Number(values.port);
  if (!/^[0-9]{1,5}$/.test(values.port ?? String(DEFAULT_PORT)) || port > 65_535) fail(`--port must be a port number (0 to 65535), not ${values.port}`);
  return { port, secretFile: values['secret-file'] ?? DEFAULT_SECRET_FILE };
}

/** The secrets of the file, one a line; each checked now rather than at the first delivery. */
function readSecrets(file: string): string[] {
  let text: string;
  try {
    text = readFileSync(resolve(file), 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      fail(`no webhook secret file at ${file}: the local gateway writes it at its start (npm start, config/local.yaml), or pass --secret-file FILE`);
    }
    fail(`cannot read ${file}: ${code ?? (error as Error).message}`);
  }
  const secrets = text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
  if (secrets.length === 0) fail(`${file} holds no secret (whsec_...)`);
  try {
    // The secrets are verifyEvent's first check: a request without headers reaches no further.
    verifyEvent(secrets, {}, '');
  } catch (error) {
    if (error instanceof WebhookVerificationError && error.reason === 'bad_secret') fail(`${file}: ${error.message}`);
  }
  return secrets;
}

const { port, secretFile } = options();
const secrets = readSecrets(secretFile);
const print = (line: string): void => {
  process.stdout.write(`${line}\n`);
};
const server = createReceiver({ secrets, print });
server.once('error', (error: NodeJS.ErrnoException) => fail(new ListenError('events receiver', HOST, port, error).message));
server.listen(port, HOST, () => {
  const address = server.address();
  const bound = address !== null && typeof address === 'object' ? address.port : port;
  const count = secrets.length === 1 ? 'its secret' : `its ${secrets.length} secrets`;
  print(`listening on http://${HOST}:${bound}/ (${count} from ${secretFile}); Ctrl-C stops`);
});

const stop = (): void => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
