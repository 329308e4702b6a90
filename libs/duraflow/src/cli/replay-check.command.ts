import { writeFile } from 'node:fs/promises';
import { exportRecordedRuns, loadReplayWorkflows, replayCheck, ReplayCheckReport } from '../replay/replay-check';
import { RecordedRunsQuery } from '../replay/read-recorded-runs';
import { CliUsageError } from './cli.errors';
import { describeDatabase } from './database-connection';

export interface ReplayCheckCommandOptions {
  module?: string;
  /** The database, when the runs do not come from a file. */
  url?: string;
  from?: string;
  json: boolean;
  query: RecordedRunsQuery;
}

/** `duraflow replay-check`: 0 when no run diverges, 1 when one does (each printed with its steps). */
export async function replayCheckCommand(options: ReplayCheckCommandOptions, print: (line: string) => void): Promise<number> {
  if (!options.module)
    throw new CliUsageError('replay-check needs --module <file> (the app module or the workflows to check). Run duraflow --help.');
  const workflows = await loadReplayWorkflows(options.module);
  const report = await replayCheck({
    ...workflows,
    ...(options.from ? { file: options.from } : { databaseUrl: options.url!, query: options.query }),
  });
  if (options.json) print(JSON.stringify(report, null, 2));
  else formatReplayReport(report, options.from ?? describeDatabase(options.url!)).forEach((line) => print(line));
  return report.diverged.length ? 1 : 0;
}

export function formatReplayReport(report: ReplayCheckReport, source: string): string[] {
  const lines = [
    `Replayed ${report.checked} recorded run${report.checked === 1 ? '' : 's'} from ${source}: ` +
      `${report.ok} ok, ${report.diverged.length} diverged, ${report.errors.length} could not be checked, ${report.skipped.length} skipped`,
  ];
  for (const run of report.diverged) {
    lines.push(
      `  DIVERGED ${run.taskId} (${run.workflowName} v${run.version}): recorded step "${run.recordedStep}", ` +
        (run.requestedStep === null ? 'but the code returned without asking for it' : `but the code asked for "${run.requestedStep}"`),
    );
  }
  for (const run of report.errors) lines.push(`  NOT CHECKED ${run.taskId} (${run.workflowName} v${run.version}): ${run.message}`);
  for (const run of report.skipped) {
    lines.push(`  SKIPPED ${run.taskId} (${run.workflowName} v${run.version}): this code has no such workflow version`);
  }
  return lines;
}

/** `duraflow export-runs --out file.json`. */
export async function exportRunsCommand(url: string, out: string | undefined, query: RecordedRunsQuery, print: (line: string) => void) {
  if (!out) throw new CliUsageError('export-runs needs --out <file.json>. Run duraflow --help.');
  const exported = await exportRecordedRuns(url, query);
  await writeFile(out, JSON.stringify(exported, null, 2));
  print(`Exported ${exported.runs.length} recorded run${exported.runs.length === 1 ? '' : 's'} from ${describeDatabase(url)} to ${out}`);
}
