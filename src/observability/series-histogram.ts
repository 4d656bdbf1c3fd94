import type { LabelValues, Metric, MetricValueWithName, Registry } from 'prom-client';

/** One series of a histogram, looked up once: observing it hashes nothing. */
export interface HistogramSeries {
  observe(value: number): void;
}

interface SeriesValues {
  readonly labels: Readonly<Record<string, string>>;
  /** Per bucket, not cumulative (the exposition adds them up); the last one is +Inf. */
  readonly counts: Float64Array;
  sum: number;
  count: number;
}

type ExposedValue = MetricValueWithName<string> & { sharedLabels?: Record<string, string> };

/** What prom-client's registry reads of a metric. */
interface ExposedMetric<V> {
  name: string;
  help: string;
  type: 'histogram';
  aggregator: 'sum';
  values: V[];
}

/**
 * A Prometheus histogram for the observations every request makes (issue 34). prom-client's
 * Histogram hashes and validates the label set on every observation, also through a child from
 * `labels()`: six observations a card cost about 10 µs of CPU. Here `labels()` gives a series
 * that adds to its own counters, and the exposition is prom-client's own (same names, buckets,
 * `+Inf`, `_sum`, `_count`, label order), through the registry's `registerMetric`.
 * A reset zeroes the series but keeps them: the series handed out keep counting.
 */
export class SeriesHistogram<T extends string> {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly name: string;
  readonly help: string;
  readonly #buckets: readonly number[];
  readonly labelNames: readonly T[];
  readonly #series = new Map<string, SeriesValues & HistogramSeries>();

  constructor(options: { name: string; help: string; labelNames: readonly T[]; buckets: readonly number[]; registers: readonly Registry[] }) {
    this.name = options.name;
    this.help = options.help;
    this.labelNames = options.labelNames;
    this.#buckets = [...options.buckets].sort((a, b) => a - b);
    for (const registry of options.registers) registry.registerMetric(this as unknown as Metric);
  }

  /** The series of `labels`, made (at zero) the first time. */
  labels(labels: LabelValues<T>): HistogramSeries {
    const values = this.labelNames.map((name) => String(labels[name] ?? ''));
    const key = values.join('\u0000');
    let series = this.#series.get(key);
    if (series === undefined) {
      for (const name of Object.keys(labels)) {
        if (!this.labelNames.includes(name as T))
          throw new Error(`Added label "${name}" is not included in initial labelset: ${JSON.stringify(this.labelNames)}`);
      }
      series = this.#newSeries(Object.fromEntries(this.labelNames.filter((name) => labels[name] !== undefined).map((name) => [name, String(labels[name])])));
      this.#series.set(key, series);
    }
    return series;
  }

  observe(labels: LabelValues<T>, value: number): void {
    this.labels(labels).observe(value);
  }

  /** Exposes the series at zero before its first observation (as prom-client's `zero`). */
  zero(labels: LabelValues<T>): void {
    this.labels(labels);
  }

  reset(): void {
    for (const series of this.#series.values()) {
      series.counts.fill(0);
      series.sum = 0;
      series.count = 0;
    }
  }

  /** What the registry prints: prom-client's histogram shape. */
  getForPromString(): Promise<ExposedMetric<ExposedValue>> {
    const values: ExposedValue[] = [];
    const bucketName = `${this.name}_bucket`;
    for (const series of this.#series.values()) {
      let cumulative = 0;
      this.#buckets.forEach((bound, index) => {
        cumulative += series.counts[index]!;
        values.push({ labels: { le: bound }, sharedLabels: series.labels, value: cumulative, metricName: bucketName });
      });
      values.push({ labels: { le: '+Inf' }, sharedLabels: series.labels, value: series.count, metricName: bucketName });
      values.push({ labels: {}, sharedLabels: series.labels, value: series.sum, metricName: `${this.name}_sum` });
      values.push({ labels: {}, sharedLabels: series.labels, value: series.count, metricName: `${this.name}_count` });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values });
  }

  /** The same values with each series' labels in them (prom-client's `get`). */
  async get(): Promise<ExposedMetric<MetricValueWithName<string>>> {
    const exposed = await this.getForPromString();
    return {
      ...exposed,
      values: exposed.values.map(({ sharedLabels, labels, ...rest }) => ({ ...rest, labels: { ...labels, ...sharedLabels } })),
    };
  }

  #newSeries(labels: Record<string, string>): SeriesValues & HistogramSeries {
    const buckets = this.#buckets;
    const series = {
      labels,
      counts: new Float64Array(buckets.length),
      sum: 0,
      count: 0,
      observe(value: number): void {
        if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
        for (let index = 0; index < buckets.length; index += 1) {
          if (value <= buckets[index]!) {
            series.counts[index] = series.counts[index]! + 1;
            break;
          }
        }
        series.sum += value;
        series.count += 1;
      },
    };
    return series;
  }
}
