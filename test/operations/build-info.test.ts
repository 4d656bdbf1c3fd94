import { afterAll, describe, expect, it, vi } from 'vitest';
import { readBuildInfo } from '../../src/build-info.js';
import { createTestGateway, type TestGateway } from '../support/gateway-fixture.js';

/**
 * The build info (`--version`, `gateway_build_info`, the `gateway listening` line) describes the
 * build the process runs: read from package.json and .git once per process, never again for
 * each gateway built (the benchmark and the tests build many in one process).
 */

const reads = vi.hoisted(() => ({ paths: [] as string[] }));

vi.mock('node:fs', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs')>();
  const readFileSync = ((path: Parameters<typeof actual.readFileSync>[0], ...rest: unknown[]) => {
    reads.paths.push(String(path));
    return (actual.readFileSync as (...args: unknown[]) => unknown)(path, ...rest);
  }) as typeof actual.readFileSync;
  return { ...actual, readFileSync, default: { ...actual, readFileSync } };
});

/** Reads of the files the build info comes from. */
const buildFileReads = () => reads.paths.filter((path) => /(^|[/\\])package\.json$|[/\\]\.git([/\\]|$)/.test(path));

describe('build info', () => {
  const gateways: TestGateway[] = [];
  afterAll(async () => {
    for (const gateway of gateways) await gateway.close();
  });

  it('is read from disk once per process, not for every gateway built', async () => {
    gateways.push(await createTestGateway());
    const afterFirst = buildFileReads().length;
    gateways.push(await createTestGateway(), await createTestGateway());
    expect(buildFileReads().slice(afterFirst)).toEqual([]);

    // ... and every gateway labels its metric with the same, correct build info.
    const expected = readBuildInfo();
    for (const { gateway } of gateways) {
      const metric = await gateway.metrics.registry.getSingleMetricAsString('gateway_build_info');
      expect(metric).toContain(`version="${expected.version}"`);
      expect(metric).toContain(`commit="${expected.commit}"`);
    }
  });
});
