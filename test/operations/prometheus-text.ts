/**
 * A strict reader of the Prometheus text exposition format (version 0.0.4), for the metrics
 * tests: every line must be a HELP, TYPE, comment or sample line; names, label names and
 * escapes as the format defines them; each family's TYPE before its samples, its samples
 * together, no series twice; histograms with increasing `le`, cumulative counts, a `+Inf`
 * bucket equal to `_count`. `metricNameProblems` is the Node-only part of what `promtool check
 * metrics` lints (names and help); promtool itself runs in `npm run check:deploy`.
 */

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface Sample {
  /** The series name (`x_bucket` for a histogram bucket). */
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface MetricFamily {
  name: string;
  help: string | undefined;
  type: MetricType;
  samples: Sample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES: ReadonlySet<string> = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

function parseValue(text: string, where: string): number {
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  if (text === 'NaN') return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new Error(`${where}: "${text}" is not a sample value`);
  return Number(text);
}

/** `{a="x",b="y\"z"}` from position `start` (at `{`): the labels and the position after `}`. */
function parseLabels(line: string, start: number, where: string): { labels: Record<string, string>; end: number } {
  const labels: Record<string, string> = {};
  let i = start + 1;
  for (;;) {
    if (line[i] === '}') return { labels, end: i + 1 };
    const nameMatch = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(line.slice(i));
    if (!nameMatch) throw new Error(`${where}: bad label name at column ${i}`);
    const name = nameMatch[0];
    i += name.length;
    if (line[i] !== '=' || line[i + 1] !== '"') throw new Error(`${where}: expected ="..." after label ${name}`);
    i += 2;
    let value = '';
    for (;;) {
      const c = line[i];
      if (c === undefined) throw new Error(`${where}: unterminated value of label ${name}`);
      if (c === '"') break;
      if (c === '\\') {
        const next = line[i + 1];
        if (next === '\\') value += '\\';
        else if (next === '"') value += '"';
        else if (next === 'n') value += '\n';
        else throw new Error(`${where}: bad escape \\${next ?? ''} in label ${name}`);
        i += 2;
        continue;
      }
      value += c;
      i += 1;
    }
    i += 1;
    if (Object.hasOwn(labels, name)) throw new Error(`${where}: label ${name} twice`);
    if (!LABEL_NAME.test(name) || name.startsWith('__')) throw new Error(`${where}: reserved label name ${name}`);
    labels[name] = value;
    if (line[i] === ',') i += 1;
    else if (line[i] !== '}') throw new Error(`${where}: expected , or } after label ${name}`);
  }
}

/** The family a series name belongs to, given the families declared so far. */
function familyOf(series: string, families: ReadonlyMap<string, MetricFamily>): MetricFamily | undefined {
  const exact = families.get(series);
  if (exact) return exact;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!series.endsWith(suffix)) continue;
    const family = families.get(series.slice(0, -suffix.length));
    if (family && (family.type === 'histogram' || (family.type === 'summary' && suffix !== '_bucket'))) return family;
  }
  return undefined;
}

const seriesKey = (sample: Sample): string =>
  `${sample.name}{${Object.entries(sample.labels)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
    .join(',')}}`;

/** Parses and checks an exposition; throws naming the line of the first problem. */
export function parsePrometheusText(text: string): Map<string, MetricFamily> {
  const families = new Map<string, MetricFamily>();
  const seen = new Set<string>();
  const finished = new Set<string>();
  let current: MetricFamily | undefined;
  if (text.length > 0 && !text.endsWith('\n')) throw new Error('the exposition does not end with a newline');
  const lines = text.split('\n');
  lines.pop();
  lines.forEach((line, index) => {
    const where = `line ${index + 1} (${line.slice(0, 80)})`;
    if (line.trim() === '') return;
    if (line.startsWith('#')) {
      const meta = /^# (HELP|TYPE) (\S+)(?: (.*))?$/.exec(line);
      if (!meta) return; // a comment
      const [, keyword, name = '', rest = ''] = meta;
      if (!METRIC_NAME.test(name)) throw new Error(`${where}: bad metric name`);
      let family = families.get(name);
      if (family && family !== current) throw new Error(`${where}: ${name} is described again after other families`);
      if (!family) {
        if (current) finished.add(current.name);
        family = { name, help: undefined, type: 'untyped', samples: [] };
        families.set(name, family);
        current = family;
      }
      if (keyword === 'HELP') {
        if (family.help !== undefined) throw new Error(`${where}: second HELP for ${name}`);
        family.help = rest.replace(/\\n/g, '\n').replace(/\\\\/g, '\\');
      } else {
        if (!TYPES.has(rest)) throw new Error(`${where}: unknown type "${rest}"`);
        if (family.samples.length > 0) throw new Error(`${where}: TYPE of ${name} after its samples`);
        family.type = rest as MetricType;
      }
      return;
    }
    const nameMatch = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line);
    if (!nameMatch) throw new Error(`${where}: not a sample line`);
    const name = nameMatch[0];
    let position = name.length;
    let labels: Record<string, string> = {};
    if (line[position] === '{') ({ labels, end: position } = parseLabels(line, position, where));
    if (line[position] !== ' ') throw new Error(`${where}: expected a space before the value`);
    const [valueText = '', timestamp, ...extra] = line
      .slice(position + 1)
      .trim()
      .split(/ +/);
    if (extra.length > 0 || (timestamp !== undefined && !/^-?\d+$/.test(timestamp))) throw new Error(`${where}: unexpected text after the value`);
    const family = familyOf(name, families);
    if (!family) throw new Error(`${where}: sample of ${name} without a TYPE or HELP line`);
    if (family !== current || finished.has(family.name)) throw new Error(`${where}: samples of ${family.name} are not together`);
    const sample: Sample = { name, labels, value: parseValue(valueText, where) };
    const key = seriesKey(sample);
    if (seen.has(key)) throw new Error(`${where}: series ${key} twice`);
    seen.add(key);
    family.samples.push(sample);
  });
  for (const family of families.values()) if (family.type === 'histogram') checkHistogram(family);
  return families;
}

function checkHistogram(family: MetricFamily): void {
  const groups = new Map<string, { buckets: { le: number; count: number }[]; count?: number; sum?: number }>();
  for (const sample of family.samples) {
    const { le, ...rest } = sample.labels;
    const key = seriesKey({ name: '', labels: rest, value: 0 });
    const group = groups.get(key) ?? { buckets: [] };
    groups.set(key, group);
    if (sample.name === `${family.name}_bucket`) {
      if (le === undefined) throw new Error(`${family.name}: a bucket without le`);
      group.buckets.push({ le: parseValue(le, `${family.name} le`), count: sample.value });
    } else if (sample.name === `${family.name}_count`) group.count = sample.value;
    else if (sample.name === `${family.name}_sum`) group.sum = sample.value;
    else throw new Error(`${family.name}: unexpected series ${sample.name} in a histogram`);
  }
  for (const [key, group] of groups) {
    const where = `${family.name}${key}`;
    if (group.count === undefined || group.sum === undefined) throw new Error(`${where}: _count or _sum missing`);
    const last = group.buckets.at(-1);
    if (!last || last.le !== Infinity) throw new Error(`${where}: no +Inf bucket last`);
    if (last.count !== group.count) throw new Error(`${where}: +Inf bucket ${last.count} differs from _count ${group.count}`);
    group.buckets.forEach((bucket, index) => {
      const previous = group.buckets[index - 1];
      if (previous && (bucket.le <= previous.le || bucket.count < previous.count)) throw new Error(`${where}: buckets not increasing at le=${bucket.le}`);
    });
  }
}

/** The value of the one series `name{labels}` (labels matched exactly); undefined when absent. */
export function seriesValue(families: ReadonlyMap<string, MetricFamily>, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const family of families.values()) {
    for (const sample of family.samples) {
      if (sample.name !== name) continue;
      const keys = Object.keys(sample.labels);
      if (keys.length === Object.keys(labels).length && keys.every((key) => sample.labels[key] === labels[key])) return sample.value;
    }
  }
  return undefined;
}

/** Units promtool's linter wants in base form (seconds, bytes), as name parts. */
const NON_BASE_UNITS = ['milliseconds', 'microseconds', 'nanoseconds', 'minutes', 'hours', 'days', 'kilobytes', 'megabytes', 'gigabytes'];

/**
 * The naming rules `promtool check metrics` lints, checked in Node so that `npm test` needs no
 * promtool: a HELP text, `_total` on counters and only on counters, snake_case, no colon (kept
 * for recording rules), base units. One line a problem; none for a clean exposition.
 */
export function metricNameProblems(families: ReadonlyMap<string, MetricFamily>): string[] {
  const problems: string[] = [];
  for (const family of families.values()) {
    const { name } = family;
    if (family.help === undefined || family.help === '') problems.push(`${name}: no help text`);
    if (family.type === 'counter' && !name.endsWith('_total')) problems.push(`${name}: counter metrics should have "_total" suffix`);
    if (family.type !== 'counter' && name.endsWith('_total')) problems.push(`${name}: non-counter metrics should not have "_total" suffix`);
    if (/[A-Z]/.test(name)) problems.push(`${name}: metric names should be written in 'snake_case' not 'camelCase'`);
    if (name.includes(':')) problems.push(`${name}: metric names should not contain ':'`);
    for (const unit of NON_BASE_UNITS) if (name.split('_').includes(unit)) problems.push(`${name}: use base unit instead of "${unit}"`);
  }
  return problems;
}
