import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ROWS } from '../bench/rows';
import { SWC_REGISTER } from './support/typescript-node';

const ROOT = path.join(__dirname, '..');

interface BenchRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runQuickBench(out: string): Promise<BenchRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-r', SWC_REGISTER, 'bench/run.ts', '--quick', '--out', out], {
      cwd: ROOT,
      env: { ...process.env, NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The figure table's rows, by figure name: value cell and unit cell. */
function tableRows(stdout: string): Map<string, { value: string; unit: string }> {
  const rows = new Map<string, { value: string; unit: string }>();
  const lines = stdout.split('\n');
  const header = lines.findIndex((line) => line.startsWith('| # | Figure | Value | Unit |'));
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith('|')) break;
    const cells = line
      .split('|')
      .slice(1, -1)
      .map((cell) => cell.trim());
    rows.set(`${cells[1]} [${cells[3]}]`, { value: cells[2], unit: cells[3] });
  }
  return rows;
}

/** Rows whose figure counts what an idle process sends: zero is a figure too. */
const MAY_BE_ZERO = new Set(['prims.idle.qps']);

describe('the quick benchmark (npm run bench:quick)', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'duraflow-bench-quick-'));
  const out = path.join(dir, 'results.json');
  let run: BenchRun;

  beforeAll(async () => {
    run = await runQuickBench(out);
  }, 120_000);

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('runs every scenario and exits 0', () => {
    if (run.code !== 0) throw new Error(`bench exited ${run.code}\n${run.stdout}\n${run.stderr.slice(-5_000)}`);
  });

  it('prints every row of the table with a positive number', () => {
    const rows = tableRows(run.stdout);
    expect(rows.size).toBe(ROWS.length);
    for (const row of ROWS) {
      const printed = rows.get(`${row.figure} [${row.unit}]`);
      expect({ figure: row.figure, unit: row.unit, printed: printed !== undefined }).toEqual({
        figure: row.figure,
        unit: row.unit,
        printed: true,
      });
      const value = Number(printed!.value);
      // An idle worker's statements over the quick run's one second: none is a right answer (its poll backs off).
      const counted = Number.isFinite(value) && (MAY_BE_ZERO.has(row.id) ? value >= 0 : value > 0);
      expect({ figure: `${row.figure} [${row.unit}]`, value: printed!.value, positive: counted }).toEqual({
        figure: `${row.figure} [${row.unit}]`,
        value: printed!.value,
        positive: true,
      });
    }
  });

  it('prints the claim plan and writes the raw results as JSON', () => {
    expect(run.stdout).toContain('EXPLAIN of the claim statement');
    expect(run.stdout).toContain(`Raw results: ${out}`);
    const json = JSON.parse(readFileSync(out, 'utf8'));
    expect(json.mode).toBe('quick');
    expect(json.errors).toEqual([]);
    expect(Object.keys(json.figures).sort()).toEqual(ROWS.map((row) => row.id).sort());
  });
});
