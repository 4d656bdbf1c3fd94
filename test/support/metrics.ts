/** Reading samples out of a Prometheus text page (the gateway's admin `/metrics`), for assertions. */

/** The sum of the Prometheus series `name` whose labels include `labels`; undefined when absent. */
export function metricSum(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  let total: number | undefined;
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const seen = new Map<string, string>();
    for (const pair of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) seen.set(pair[1] ?? '', pair[2] ?? '');
    if (Object.entries(labels).every(([key, value]) => seen.get(key) === value)) total = (total ?? 0) + Number(match[3]);
  }
  return total;
}
