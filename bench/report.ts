import { ROWS, RowDefinition } from './rows';

export type FigureValue = number;

export interface Figure {
  value: FigureValue;
  note?: string;
}

/** The figures of one run, by row id; a row with no figure is printed as `error`. */
export class BenchResults {
  readonly figures = new Map<string, Figure>();
  readonly errors: Array<{ scenario: string; message: string }> = [];

  set(id: string, value: FigureValue, note?: string): void {
    if (!ROWS.some((row) => row.id === id)) throw new Error(`No table row "${id}"`);
    if (typeof value === 'number' && !Number.isFinite(value)) throw new Error(`Row "${id}": ${value} is not a number`);
    this.figures.set(id, { value, note });
  }

  /** A scenario (or part of one) threw: its rows stay `error` and the run exits non-zero. */
  fail(scenario: string, error: unknown): void {
    const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
    this.errors.push({ scenario, message });
    process.stderr.write(`[bench] ${scenario} FAILED: ${message}\n`);
  }

  get(id: string): FigureValue | undefined {
    return this.figures.get(id)?.value;
  }
}

/** Three significant digits, no thousands separators (the quick test parses the table). */
export function formatNumber(value: number): string {
  if (value === 0) return '0';
  const abs = Math.abs(value);
  if (abs >= 100) return String(Math.round(value));
  if (abs >= 10) return value.toFixed(1);
  if (abs >= 1) return value.toFixed(2);
  return value.toPrecision(3);
}

function ratioCell(row: RowDefinition, value: FigureValue | undefined, results: BenchResults): string {
  if (typeof value !== 'number') return '—';
  const tps1 = results.get('ref.insert.c1');
  const tps4 = results.get('ref.insert.c4');
  switch (row.ratio) {
    case 'tps1':
      return typeof tps1 === 'number' && tps1 > 0 ? `${formatNumber(value / tps1)}× 1c` : '—';
    case 'tps4':
      return typeof tps4 === 'number' && tps4 > 0 ? `${formatNumber(value / tps4)}× 4c` : '—';
    case 'time1': {
      if (typeof tps1 !== 'number' || tps1 <= 0) return '—';
      const commitMs = 1000 / tps1;
      return `${formatNumber(value / commitMs)}× 1c commit`;
    }
    default:
      return '—';
  }
}

/** A drain's rate against the same run's pgbench SKIP LOCKED claim (one row claimed and marked done per transaction, 4 clients). */
function claimRatioCell(row: RowDefinition, value: FigureValue | undefined, results: BenchResults): string {
  const claims = results.get('ref.skiplocked.c4');
  if (!row.vsClaim || typeof value !== 'number' || typeof claims !== 'number' || claims <= 0) return '—';
  return `${formatNumber(value / claims)}× claim`;
}

/** The one Markdown table of the run. */
export function renderTable(results: BenchResults): string {
  const lines = ['| # | Figure | Value | Unit | vs pgbench | vs pgbench claim | Notes |', '|---:|---|---:|---|---:|---:|---|'];
  ROWS.forEach((row, index) => {
    const figure = results.figures.get(row.id);
    const value = figure === undefined ? 'error' : formatNumber(figure.value);
    const note = (figure?.note ?? '').replace(/\|/g, '/');
    lines.push(
      `| ${index + 1} | ${row.figure} | ${value} | ${row.unit} | ${ratioCell(row, figure?.value, results)} | ${claimRatioCell(row, figure?.value, results)} | ${note} |`,
    );
  });
  return lines.join('\n');
}
