import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import { ConfigError } from '../../src/config/config-error.js';
import { loadConfig, type GatewayConfig, type LoadOptions } from '../../src/config/load-config.js';
import { parsePrometheusText, seriesValue } from '../operations/prometheus-text.js';
import { certificateUntil, type ExpiringCertificate } from './expiring-certificate.js';
import { createTestGateway, productionSafeOverrides, rawTestConfig, writeTestConfig, type RawConfig } from '../support/gateway-fixture.js';

/**
 * D51 at load: a certificate (the API listener's, or the connector client certificate) that ends
 * within 14 days is a warning naming its file and its end; an expired one stops a production start
 * (in the one list of problems) and is a warning elsewhere and at a reload. The certificates are
 * made for the test (notAfter in 3 days, and yesterday); the 14-day boundary is judged with an
 * injected clock. `/metrics` carries one expiry series per certificate.
 */

const DAY = 86_400_000;
const RUNBOOK = 'docs/runbooks/rotate-tls-certificate.md';
const scratch: string[] = [];
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

interface TestCertificate extends ExpiringCertificate {
  /** The certificate's and the key's files (mode 0600), in place of the PEM texts. */
  cert: string;
  key: string;
}

/** A certificate valid until `notAfter`, its files written with mode 0600. */
async function certificateFilesUntil(notAfter: number): Promise<TestCertificate> {
  const pem = await certificateUntil(notAfter);
  const dir = mkdtempSync(join(tmpdir(), 'cert-expiry-'));
  scratch.push(dir);
  const cert = join(dir, 'tls.crt');
  const key = join(dir, 'tls.key');
  writeFileSync(cert, pem.cert, { mode: 0o600 });
  writeFileSync(key, pem.key, { mode: 0o600 });
  return { ...pem, cert, key };
}

async function written(raw: RawConfig): Promise<string> {
  const config = await writeTestConfig(raw);
  scratch.push(config.dir);
  return config.file;
}

async function refused(file: string, options: LoadOptions = {}): Promise<readonly string[]> {
  const error: unknown = await loadConfig(file, {}, options).then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error, 'the config should be refused').toBeInstanceOf(ConfigError);
  return (error as ConfigError).problems;
}

const tlsOf = (certificate: TestCertificate): RawConfig => ({ cert: { file: certificate.cert }, key: { file: certificate.key } });
/** The connector over https with a client certificate (production-shaped: its secret too). */
async function connectorWithClient(certificate: TestCertificate): Promise<RawConfig> {
  const { connector } = await productionSafeOverrides();
  return { connector: { ...(connector as RawConfig), tls: tlsOf(certificate) } };
}

let endsSoon: TestCertificate;
let ended: TestCertificate;
beforeAll(async () => {
  [endsSoon, ended] = await Promise.all([certificateFilesUntil(Date.now() + 3 * DAY), certificateFilesUntil(Date.now() - DAY)]);
});

const soonLine = (file: string, field: string, certificate: TestCertificate) =>
  `${file}: ${field}: certificate ${certificate.cert} expires on ${certificate.endText}, within 14 days; renew it (${RUNBOOK})`;
const endedLine = (file: string, field: string, certificate: TestCertificate) =>
  `${file}: ${field}: certificate ${certificate.cert} expired on ${certificate.endText}; renew it (${RUNBOOK})`;

describe('the API listener certificate', () => {
  it('ending in 3 days: a warning naming the file and the date; sandbox and production both start', async () => {
    const sandbox = await written(await rawTestConfig({ tls: tlsOf(endsSoon) }));
    expect((await loadConfig(sandbox, {})).warnings).toContain(soonLine(sandbox, 'tls.cert', endsSoon));
    const production = await written(await rawTestConfig({ ...(await productionSafeOverrides()), tls: tlsOf(endsSoon) }));
    const config = await loadConfig(production, {});
    expect(config.warnings).toContain(soonLine(production, 'tls.cert', endsSoon));
    expect(config.tls.certificateExpiresAt).toBe(endsSoon.end / 1000);
  });

  it('expired: production refuses, in the one list with the other problems', async () => {
    const file = await written(await rawTestConfig({ ...(await productionSafeOverrides()), tls: tlsOf(ended), allowlist: ['127.1'] }));
    expect(await refused(file)).toEqual([
      `${file}: allowlist[0]: "127.1" is not a four-part decimal IPv4 address or range`,
      `${endedLine(file, 'tls.cert', ended)} (production refuses an expired certificate)`,
    ]);
  });

  it('expired: sandbox starts with a warning, and a production reload warns instead of refusing', async () => {
    const sandbox = await written(await rawTestConfig({ tls: tlsOf(ended) }));
    expect((await loadConfig(sandbox, {})).warnings).toContain(endedLine(sandbox, 'tls.cert', ended));
    const production = await written(await rawTestConfig({ ...(await productionSafeOverrides()), tls: tlsOf(ended) }));
    expect((await loadConfig(production, {}, { forReload: true })).warnings).toContain(endedLine(production, 'tls.cert', ended));
  });

  it('a certificate a year from its end says nothing', async () => {
    const file = await written(await rawTestConfig());
    expect((await loadConfig(file, {})).warnings.filter((line) => line.includes('tls.cert'))).toEqual([]);
  });
});

describe('the connector client certificate', () => {
  it('ending in 3 days: a warning on connector.tls.cert', async () => {
    const file = await written(await rawTestConfig(await connectorWithClient(endsSoon)));
    const config = await loadConfig(file, {});
    expect(config.warnings).toContain(soonLine(file, 'connector.tls.cert', endsSoon));
    expect(config.connector.tls?.certificateExpiresAt).toBe(endsSoon.end / 1000);
  });

  it('expired: production refuses', async () => {
    const file = await written(await rawTestConfig({ ...(await productionSafeOverrides()), ...(await connectorWithClient(ended)) }));
    expect(await refused(file)).toEqual([`${endedLine(file, 'connector.tls.cert', ended)} (production refuses an expired certificate)`]);
  });
});

describe('the boundaries, with the clock injected', () => {
  let file: string;
  const warningsAt = async (now: number): Promise<readonly string[]> =>
    (await loadConfig(file, {}, { clock: new ManualClock(now) })).warnings.filter((line) => line.includes('tls.cert'));
  beforeAll(async () => {
    file = await written(await rawTestConfig({ ...(await productionSafeOverrides()), tls: tlsOf(endsSoon) }));
  });

  it('a second more than 14 days before the end: nothing; exactly 14 days before: the warning', async () => {
    expect(await warningsAt(endsSoon.end - 14 * DAY - 1000)).toEqual([]);
    expect(await warningsAt(endsSoon.end - 14 * DAY)).toEqual([soonLine(file, 'tls.cert', endsSoon)]);
  });

  it('at the end itself the certificate is still valid (a warning); a second later production refuses it', async () => {
    expect(await warningsAt(endsSoon.end)).toEqual([soonLine(file, 'tls.cert', endsSoon)]);
    expect(await refused(file, { clock: new ManualClock(endsSoon.end + 1000) })).toEqual([
      `${endedLine(file, 'tls.cert', endsSoon)} (production refuses an expired certificate)`,
    ]);
  });
});

describe('the expiry metric: one series per certificate (listener label)', () => {
  async function expirySeries(config: GatewayConfig): Promise<{ api?: number; client?: number; samples: number }> {
    const gateway = await createTestGateway({ config });
    try {
      const families = parsePrometheusText((await gateway.gateway.admin.inject({ method: 'GET', url: '/metrics' })).body);
      return {
        api: seriesValue(families, 'gateway_tls_certificate_expiry_timestamp_seconds', { listener: 'api' }),
        client: seriesValue(families, 'gateway_tls_certificate_expiry_timestamp_seconds', { listener: 'connector_client' }),
        samples: families.get('gateway_tls_certificate_expiry_timestamp_seconds')?.samples.length ?? 0,
      };
    } finally {
      await gateway.close();
    }
  }

  it('listener="api" and listener="connector_client", each the notAfter of its certificate', async () => {
    const config = await loadConfig(await written(await rawTestConfig({ tls: tlsOf(ended), ...(await connectorWithClient(endsSoon)) })), {});
    expect(await expirySeries(config)).toEqual({ api: ended.end / 1000, client: endsSoon.end / 1000, samples: 2 });
  });

  it('without a client certificate, the api series alone', async () => {
    const config = await loadConfig(await written(await rawTestConfig({ tls: tlsOf(endsSoon) })), {});
    expect(await expirySeries(config)).toEqual({ api: endsSoon.end / 1000, client: undefined, samples: 1 });
  });
});

/**
 * D51 for the CA files the gateway loads to verify its peers: each certificate of a bundle that
 * ends within 14 days, or has ended, is a warning naming the file (and its place in a bundle);
 * production refuses a CA file only when every certificate in it has ended (no peer could verify).
 */
describe('the CA files: connector.tls.ca and store.redis.tls.ca', () => {
  let aYear: TestCertificate;
  beforeAll(async () => {
    aYear = await certificateFilesUntil(Date.now() + 365 * DAY);
  });

  /** A CA file holding the certificates of `certificates`, in that order. */
  function caFile(...certificates: TestCertificate[]): string {
    const dir = mkdtempSync(join(tmpdir(), 'ca-expiry-'));
    scratch.push(dir);
    const path = join(dir, 'ca.crt');
    writeFileSync(path, certificates.map((certificate) => readFileSync(certificate.cert, 'utf8')).join(''));
    return path;
  }
  async function connectorCa(path: string): Promise<RawConfig> {
    const { connector } = await productionSafeOverrides();
    return { connector: { ...(connector as RawConfig), tls: { ca: { file: path } } } };
  }

  it('connector.tls.ca ending in 3 days: a warning naming the file and the date', async () => {
    const path = caFile(endsSoon);
    const file = await written(await rawTestConfig(await connectorCa(path)));
    expect((await loadConfig(file, {})).warnings).toContain(
      `${file}: connector.tls.ca: CA certificate ${path} expires on ${endsSoon.endText}, within 14 days; renew it (${RUNBOOK})`,
    );
  });

  it('connector.tls.ca expired: production refuses; in sandbox a warning', async () => {
    const path = caFile(ended);
    const line = (file: string) => `${file}: connector.tls.ca: CA certificate ${path} expired on ${ended.endText}; renew it (${RUNBOOK})`;
    const production = await written(await rawTestConfig({ ...(await productionSafeOverrides()), ...(await connectorCa(path)) }));
    expect(await refused(production)).toEqual([`${line(production)} (production refuses a CA file whose certificates have all expired)`]);
    const sandbox = await written(await rawTestConfig(await connectorCa(path)));
    expect((await loadConfig(sandbox, {})).warnings).toContain(line(sandbox));
  });

  it('a bundle with an expired certificate beside a valid one: production starts, warning about that one by its place', async () => {
    const path = caFile(aYear, ended);
    const file = await written(await rawTestConfig({ ...(await productionSafeOverrides()), ...(await connectorCa(path)) }));
    const caWarnings = (await loadConfig(file, {})).warnings.filter((line) => line.includes('tls.ca'));
    expect(caWarnings).toEqual([`${file}: connector.tls.ca: CA certificate 2 of ${path} expired on ${ended.endText}; renew it (${RUNBOOK})`]);
  });

  it('store.redis.tls.ca ending in 3 days: a warning; a CA a year from its end says nothing', async () => {
    const redis = (path: string): RawConfig => ({
      store: { kind: 'redis', redis: { url: 'rediss://127.0.0.1:6380', tls: { ca: { file: path } }, keyPrefix: 'test:ca-expiry:' } },
    });
    const soon = caFile(endsSoon);
    const file = await written(await rawTestConfig(redis(soon)));
    expect((await loadConfig(file, {})).warnings).toContain(
      `${file}: store.redis.tls.ca: CA certificate ${soon} expires on ${endsSoon.endText}, within 14 days; renew it (${RUNBOOK})`,
    );
    const quiet = await written(await rawTestConfig(redis(caFile(aYear))));
    expect((await loadConfig(quiet, {})).warnings.filter((line) => line.includes('tls.ca'))).toEqual([]);
  });
});
