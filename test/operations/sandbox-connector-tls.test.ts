import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawTestConfig, testCertificatePem, writeTestConfig } from '../support/gateway-fixture.js';
import {
  builtEntryPoints,
  call,
  cardBody,
  killAll,
  loginOver,
  postCard,
  REPO,
  runToExit,
  startGateway,
  startProcess,
  type BuiltEntryPoints,
  type RunningProcess,
} from './support.js';

/**
 * The standalone sandbox connector (`node dist/src/connector/sandbox/main.js`, what
 * `npm run connector` runs) over HTTPS and mutual TLS from SANDBOX_CONNECTOR_TLS_*, with the
 * certificates `deploy/compose/make-secrets.sh` makes, started and configured exactly as
 * docs/connector-contract.md says: a gateway process with `connector.tls` creates a card end to
 * end; without its client certificate, or without the CA, it gets 502 and an unready /readyz.
 */

const CONTRACT = readFileSync(join(REPO, 'docs', 'connector-contract.md'), 'utf8');
/** Where the docs put make-secrets.sh's output, relative to the repository. */
const DOCUMENTED_STATE = 'deploy/compose/state';

/** The fenced blocks of a Markdown text, with their language. */
function fencedBlocks(markdown: string): { language: string; body: string }[] {
  return [...markdown.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((match) => ({ language: match[1] ?? '', body: match[2] ?? '' }));
}

/** The documented connector command: its SANDBOX_CONNECTOR_* variables, with `$S` resolved. */
function documentedConnectorEnvironment(state: string): Record<string, string> {
  const block = fencedBlocks(CONTRACT).find((candidate) => candidate.language === 'sh' && candidate.body.includes('SANDBOX_CONNECTOR_TLS_CERT='));
  if (!block) throw new Error('docs/connector-contract.md has no sh block starting the connector over TLS');
  expect(block.body).toContain('deploy/compose/make-secrets.sh');
  const folder = /^S=(\S+)$/m.exec(block.body)?.[1];
  expect(folder).toBe(`${DOCUMENTED_STATE}/secrets`);
  const command = block.body.split('\n').find((line) => line.includes('SANDBOX_CONNECTOR_TLS_CERT=')) ?? '';
  expect(command.trim().endsWith('npm run connector')).toBe(true);
  const environment: Record<string, string> = {};
  for (const [, name = '', value = ''] of command.matchAll(/(SANDBOX_CONNECTOR_\w+)=(\S+)/g))
    environment[name] = value.replace(/^\$S\//, `${join(state, 'secrets')}/`);
  return environment;
}

/** The documented gateway `connector.tls`, with the state folder resolved. */
function documentedGatewayTls(state: string): { ca: { file: string }; cert: { file: string }; key: { file: string } } {
  const block = fencedBlocks(CONTRACT).find((candidate) => candidate.language === 'yaml' && candidate.body.includes('connector-client.crt'));
  if (!block) throw new Error('docs/connector-contract.md has no yaml block with the gateway side');
  const { connector } = parse(block.body) as { connector: { url: string; tls: Record<'ca' | 'cert' | 'key', { file: string }> } };
  expect(new URL(connector.url).hostname).toBe('127.0.0.1');
  const local = (entry: { file: string }) => ({ file: entry.file.replace(DOCUMENTED_STATE, state) });
  return { ca: local(connector.tls.ca), cert: local(connector.tls.cert), key: local(connector.tls.key) };
}

describe('the sandbox connector over TLS and mutual TLS, as documented', () => {
  let entry: BuiltEntryPoints;
  let state: string;
  let ca: string;
  let tls: ReturnType<typeof documentedGatewayTls>;
  const scratch: string[] = [];

  beforeAll(async () => {
    [entry, ca] = await Promise.all([builtEntryPoints(), testCertificatePem()]);
    state = mkdtempSync(join(tmpdir(), 'ops-connector-tls-'));
    scratch.push(state);
    const made = await runToExit('bash', [join(REPO, 'deploy', 'compose', 'make-secrets.sh'), state], {
      env: { HASH_PASSWORD_COMMAND: `${JSON.stringify(process.execPath)} ${JSON.stringify(entry.hashPasswordJs)}` },
      timeoutMs: 60_000,
    });
    expect(made.code, `${made.stdout}${made.stderr}`).toBe(0);
    tls = documentedGatewayTls(state);
  }, 180_000);

  afterAll(async () => {
    await killAll();
    for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
  });

  it('npm run connector is the entry point started here', () => {
    const scripts = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    expect(scripts['connector']).toBe('node dist/src/connector/sandbox/main.js');
  });

  /** The connector's entry point with `environment`, on a free port; resolves with its URL. */
  async function startConnector(environment: Record<string, string>): Promise<{ process: RunningProcess; url: string; banner: string }> {
    const running = startProcess(process.execPath, [entry.connectorJs], {
      env: { SANDBOX_CONNECTOR_HOST: '127.0.0.1', SANDBOX_CONNECTOR_PORT: '0', ...environment },
    });
    const deadline = Date.now() + 15_000;
    for (;;) {
      const banner = running.lines.find((line) => line.startsWith('sandbox connector listening on '));
      if (banner) return { process: running, url: /on (\S+)/.exec(banner)?.[1] ?? '', banner };
      if (running.hasExited() || Date.now() > deadline) {
        await running.kill();
        throw new Error(`the sandbox connector did not start: ${running.stdout()}${running.stderr()}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  async function gatewayTo(url: string, connectorTls: Record<string, { file: string }>) {
    const written = await writeTestConfig(await rawTestConfig({ trustedProxies: [], connector: { url, timeoutMs: 3000, tls: connectorTls } }));
    scratch.push(written.dir);
    return startGateway(written.file);
  }

  const readyz = async (adminUrl: string) => {
    const answer = await call(`${adminUrl}/readyz`, { timeoutMs: 5000 });
    return { status: answer.status, checks: (JSON.parse(answer.body) as { checks: Record<string, string> }).checks };
  };

  it('mutual TLS: the gateway with its client certificate creates a card; without it, or without the CA, 502', async () => {
    const connector = await startConnector(documentedConnectorEnvironment(state));
    expect(connector.banner).toBe(`sandbox connector listening on ${connector.url} (mutual TLS: client certificates required)`);
    expect(connector.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);

    const [withCertificate, withoutCertificate, withoutCa] = await Promise.all([
      gatewayTo(connector.url, tls),
      gatewayTo(connector.url, { ca: tls.ca }),
      // The connector's certificate is always verified: without the sandbox CA it is not trusted.
      gatewayTo(connector.url, { cert: tls.cert, key: tls.key }),
    ]);

    const token = await loginOver(withCertificate.httpsUrl, ca);
    const created = await postCard(withCertificate.httpsUrl, ca, token, cardBody(), { reveal: true });
    expect(created.status, created.body).toBe(201);
    expect((JSON.parse(created.body) as { pan: string }).pan).toMatch(/^400000\d{10}$/);
    expect(await readyz(withCertificate.adminUrl)).toMatchObject({ status: 200, checks: { connector: 'ok' } });

    for (const refused of [withoutCertificate, withoutCa]) {
      const answer = await postCard(refused.httpsUrl, ca, await loginOver(refused.httpsUrl, ca), cardBody());
      expect(answer.status, answer.body).toBe(502);
      expect(JSON.parse(answer.body)).toMatchObject({ status: 502 });
      expect(await readyz(refused.adminUrl)).toMatchObject({ status: 503, checks: { connector: 'unavailable' } });
    }

    connector.process.child.kill('SIGTERM');
    expect(await connector.process.exitWithin(5000)).toEqual({ code: 0, signal: null });
  });

  it('TLS without a client CA: the gateway that trusts the sandbox CA creates a card', async () => {
    const { SANDBOX_CONNECTOR_TLS_CLIENT_CA: _clientCa, ...serverOnly } = documentedConnectorEnvironment(state);
    const connector = await startConnector(serverOnly);
    expect(connector.banner).toBe(`sandbox connector listening on ${connector.url}`);
    const gateway = await gatewayTo(connector.url, { ca: tls.ca });
    const answer = await postCard(gateway.httpsUrl, ca, await loginOver(gateway.httpsUrl, ca), cardBody());
    expect(answer.status, answer.body).toBe(201);
  });

  it('refuses half a TLS setting at start', async () => {
    const { SANDBOX_CONNECTOR_TLS_CERT: cert } = documentedConnectorEnvironment(state);
    const result = await runToExit(process.execPath, [entry.connectorJs], { env: { SANDBOX_CONNECTOR_PORT: '0', SANDBOX_CONNECTOR_TLS_CERT: cert } });
    expect(result.code).toBe(78);
    expect(result.stderr).toBe('sandbox connector: SANDBOX_CONNECTOR_TLS_CERT and SANDBOX_CONNECTOR_TLS_KEY go together\n');
  });
});
