import { formatDuration } from './format';
import { html, Html } from './html';

/**
 * Charts drawn on the server as inline SVG: no script, no inline style (the policy forbids it),
 * colours from the stylesheet's classes (so dark mode follows), and every chart an `img` with a
 * label that says what it shows; the numbers themselves are in a table next to it.
 */

/** One series of a chart: its name, the stylesheet class that colours it, one value per interval. */
export interface ChartSeries {
  name: string;
  cls: string;
  values: Array<number | null>;
}

const WIDTH = 600;
const PLOT_LEFT = 44;
const PLOT_RIGHT = 8;
const PLOT_TOP = 8;

interface Frame {
  height: number;
  plotBottom: number;
  plotWidth: number;
  slot: number;
}

function frame(count: number, height: number): Frame {
  const plotBottom = height - 22;
  const plotWidth = WIDTH - PLOT_LEFT - PLOT_RIGHT;
  return { height, plotBottom, plotWidth, slot: plotWidth / Math.max(1, count) };
}

/** A round ceiling for an axis: 1, 2, 5 times a power of ten. */
function niceMax(value: number): number {
  if (value <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((step) => step * power).find((candidate) => candidate >= value) ?? 10 * power;
}

function axes(f: Frame, top: string, xLabels: [string, string]): Html {
  return html`<line class="axis" x1="${PLOT_LEFT}" y1="${f.plotBottom}" x2="${WIDTH - PLOT_RIGHT}" y2="${f.plotBottom}"></line>
<line class="grid" x1="${PLOT_LEFT}" y1="${PLOT_TOP}" x2="${WIDTH - PLOT_RIGHT}" y2="${PLOT_TOP}"></line>
<text class="tick" x="${PLOT_LEFT - 4}" y="${PLOT_TOP + 4}" text-anchor="end">${top}</text>
<text class="tick" x="${PLOT_LEFT - 4}" y="${f.plotBottom}" text-anchor="end">0</text>
<text class="tick" x="${PLOT_LEFT}" y="${f.height - 6}">${xLabels[0]}</text>
<text class="tick" x="${WIDTH - PLOT_RIGHT}" y="${f.height - 6}" text-anchor="end">${xLabels[1]}</text>`;
}

function legend(series: ChartSeries[]): Html {
  return html`<ul class="legend" aria-hidden="true">${series.map((entry) => html`<li><span class="swatch ${entry.cls}"></span>${entry.name}</li>`)}</ul>`;
}

/** Bars stacked per interval (counts), with an optional line over them (another count, on the same axis). */
export function stackedBarChart(options: {
  label: string;
  series: ChartSeries[];
  line?: ChartSeries;
  xLabels: [string, string];
  height?: number;
}): Html {
  const { series, line } = options;
  const count = Math.max(0, ...series.map((entry) => entry.values.length));
  const f = frame(count, options.height ?? 170);
  const totals = Array.from({ length: count }, (_, i) => series.reduce((sum, entry) => sum + (entry.values[i] ?? 0), 0));
  const max = niceMax(Math.max(0, ...totals, ...(line?.values ?? []).map((value) => value ?? 0)));
  const scale = (value: number) => (value / max) * (f.plotBottom - PLOT_TOP);
  const bars: Html[] = [];
  for (let i = 0; i < count; i++) {
    let y = f.plotBottom;
    for (const entry of series) {
      const value = entry.values[i] ?? 0;
      if (!value) continue;
      const h = Math.max(1, scale(value));
      y -= h;
      bars.push(
        html`<rect class="${entry.cls}" x="${(PLOT_LEFT + i * f.slot + f.slot * 0.12).toFixed(1)}" y="${y.toFixed(1)}" width="${(f.slot * 0.76).toFixed(1)}" height="${h.toFixed(1)}"></rect>`,
      );
    }
  }
  const points = line?.values
    .map((value, i) =>
      value === null ? null : `${(PLOT_LEFT + (i + 0.5) * f.slot).toFixed(1)},${(f.plotBottom - scale(value)).toFixed(1)}`,
    )
    .filter((point): point is string => point !== null);
  return html`<figure class="chart">
<svg viewBox="0 0 ${WIDTH} ${f.height}" role="img" aria-label="${options.label}">
${axes(f, String(max), options.xLabels)}
${bars}
${line && points?.length && html`<polyline class="line ${line.cls}" points="${points.join(' ')}"></polyline>`}
</svg>
${legend(line ? [...series, line] : series)}
</figure>`;
}

/** Lines of durations per interval (gaps where an interval has none), on a millisecond axis. */
export function durationChart(options: { label: string; series: ChartSeries[]; xLabels: [string, string]; height?: number }): Html {
  const count = Math.max(0, ...options.series.map((entry) => entry.values.length));
  const f = frame(count, options.height ?? 150);
  const max = niceMax(Math.max(0, ...options.series.flatMap((entry) => entry.values.map((value) => value ?? 0))));
  const y = (value: number) => f.plotBottom - (value / max) * (f.plotBottom - PLOT_TOP);
  const drawn = options.series.map((entry) => {
    const points = entry.values
      .map((value, i) => (value === null ? null : ([PLOT_LEFT + (i + 0.5) * f.slot, y(value)] as const)))
      .filter((point): point is readonly [number, number] => point !== null);
    return html`<polyline class="line ${entry.cls}" points="${points.map(([x, py]) => `${x.toFixed(1)},${py.toFixed(1)}`).join(' ')}"></polyline>
${points.map(([x, py]) => html`<circle class="dot ${entry.cls}" cx="${x.toFixed(1)}" cy="${py.toFixed(1)}" r="2.5"></circle>`)}`;
  });
  return html`<figure class="chart">
<svg viewBox="0 0 ${WIDTH} ${f.height}" role="img" aria-label="${options.label}">
${axes(f, formatDuration(max), options.xLabels)}
${drawn}
</svg>
${legend(options.series)}
</figure>`;
}

/** A small chart of one series of counts for a table row. */
export function sparkline(label: string, series: ChartSeries[]): Html {
  const count = Math.max(0, ...series.map((entry) => entry.values.length));
  const width = 120;
  const height = 28;
  const slot = width / Math.max(1, count);
  const totals = Array.from({ length: count }, (_, i) => series.reduce((sum, entry) => sum + (entry.values[i] ?? 0), 0));
  const max = Math.max(1, ...totals);
  const bars: Html[] = [];
  for (let i = 0; i < count; i++) {
    let y = height;
    for (const entry of series) {
      const value = entry.values[i] ?? 0;
      if (!value) continue;
      const h = Math.max(1, (value / max) * height);
      y -= h;
      bars.push(
        html`<rect class="${entry.cls}" x="${(i * slot + slot * 0.1).toFixed(1)}" y="${y.toFixed(1)}" width="${(slot * 0.8).toFixed(1)}" height="${h.toFixed(1)}"></rect>`,
      );
    }
  }
  return html`<svg class="spark" viewBox="0 0 ${width} ${height}" role="img" aria-label="${label}">${bars}</svg>`;
}
