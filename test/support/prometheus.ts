/**
 * Reads a Prometheus text exposition (what `GET /metrics` answers): the value of one sample by
 * its name and labels, as a scraper would see it.
 */
export function sampleValue(exposition: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of exposition.split('\n')) {
    if (line.startsWith('#') || !line.trim()) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!match || match[1] !== name) continue;
    const found: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) found[key] = value;
    if (Object.entries(labels).every(([key, value]) => found[key] === value) && Object.keys(found).length === Object.keys(labels).length) {
      return Number(match[3]);
    }
  }
  return undefined;
}

/** The `# TYPE` line's type of a metric, or undefined when the exposition has none of that name. */
export function metricType(exposition: string, name: string): string | undefined {
  return new RegExp(`^# TYPE ${name} (\\w+)$`, 'm').exec(exposition)?.[1];
}
