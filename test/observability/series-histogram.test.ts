import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { SeriesHistogram } from '../../src/observability/series-histogram.js';

const OPTIONS = {
  name: 'gateway_test_duration_seconds',
  help: 'A histogram as the gateway declares one.',
  labelNames: ['method', 'route', 'status_code'] as const,
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
};

/** The same observations through prom-client's Histogram and through SeriesHistogram: their expositions. */
async function bothExpositions(
  observe: (histogram: { observe(labels: Record<string, string>, value: number): void; zero(labels: Record<string, string>): void }) => void,
) {
  const theirs = new Registry();
  const ours = new Registry();
  observe(new Histogram({ ...OPTIONS, labelNames: [...OPTIONS.labelNames], registers: [theirs] }));
  const series = new SeriesHistogram({ ...OPTIONS, registers: [ours] });
  observe(series);
  return {
    theirs: await theirs.metrics(),
    ours: await ours.metrics(),
    oursJson: await ours.getMetricsAsJSON(),
    theirsJson: await theirs.getMetricsAsJSON(),
    series,
  };
}

describe('SeriesHistogram: observations without hashing a label set, exposed as prom-client does (issue 34)', () => {
  it('prints what prom-client prints for the same observations: zeroed series, bucket bounds, values past the last bucket, labels to escape', async () => {
    const { theirs, ours, theirsJson, oursJson } = await bothExpositions((histogram) => {
      histogram.zero({ method: 'GET', route: '/healthz', status_code: '200' });
      const labels = { method: 'POST', route: '/api/v1/issuing/cards', status_code: '201' };
      for (const value of [0, 0.001, 0.0010001, 0.003, 0.25, 0.7, 10, 11, 1e6]) histogram.observe(labels, value);
      histogram.observe({ method: 'POST', route: '/a "quoted"\\route\n', status_code: '500' }, 0.02);
    });
    expect(ours).toBe(theirs);
    // prom-client's JSON also carries an empty `exemplar` per value (exemplars are off): the rest is the same.
    const withoutExemplars = (json: typeof theirsJson) =>
      json.map((metric) => ({
        ...metric,
        values: metric.values.map((value) => Object.fromEntries(Object.entries(value).filter(([key]) => key !== 'exemplar'))),
      }));
    expect(withoutExemplars(oursJson)).toEqual(withoutExemplars(theirsJson));
    expect(ours).toContain('gateway_test_duration_seconds_bucket{le="+Inf",method="POST",route="/api/v1/issuing/cards",status_code="201"} 9');
    expect(ours).toContain('gateway_test_duration_seconds_bucket{le="0.001",method="POST",route="/api/v1/issuing/cards",status_code="201"} 2');
  });

  it('a series from labels() keeps counting into the same series as observe(labels) does', async () => {
    const registry = new Registry();
    const histogram = new SeriesHistogram({ ...OPTIONS, registers: [registry] });
    const labels = { method: 'GET', route: '/x', status_code: '200' };
    const series = histogram.labels(labels);
    series.observe(0.004);
    histogram.observe(labels, 0.004);
    expect(await registry.metrics()).toContain('gateway_test_duration_seconds_count{method="GET",route="/x",status_code="200"} 2');
    // A reset zeroes the series and keeps them: the series handed out count on.
    registry.resetMetrics();
    series.observe(0.5);
    const text = await registry.metrics();
    expect(text).toContain('gateway_test_duration_seconds_count{method="GET",route="/x",status_code="200"} 1');
    expect(text).toContain('gateway_test_duration_seconds_sum{method="GET",route="/x",status_code="200"} 0.5');
  });

  it('refuses a label it was not declared with, and a value that is not a number, as prom-client does', () => {
    const histogram = new SeriesHistogram({ ...OPTIONS, registers: [] });
    expect(() => histogram.labels({ method: 'GET', route: '/x', status_code: '200', extra: 'no' } as never)).toThrow(/extra/);
    expect(() => histogram.observe({ method: 'GET', route: '/x', status_code: '200' }, Number.NaN)).toThrow(TypeError);
  });
});
