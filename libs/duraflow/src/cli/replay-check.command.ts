import { PayloadCodec } from '../domain/payload-codec';
import { exportRecordedRuns, loadReplayWorkflows, replayCheck, ReplayCheckReport } from '../replay/replay-check';
import { RecordedRunsQuery } from '../replay/read-recorded-runs';
import { CliUsageError } from './cli.errors';
import { describeDatabase } from './database-connection';
import { writePrivateFile } from './private-file';
import { terminalText as shown } from './terminal-text';

export interface ReplayCheckCommandOptions {
  module?: string;
  /** The database, when the runs do not come from a file. */
  url?: string;
  from?: string;
  json: boolean;
  query: RecordedRunsQuery;
  /** The payloads' codec (DURAFLOW_CODEC_KEYS): recorded inputs and outputs are decoded with it. */
  codec?: PayloadCodec;
}

/** `duraflow replay-check`: 0 when no run diverges, 1 when one does (each printed with its steps). */
export async function replayCheckCommand(options: ReplayCheckCommandOptions, print: (line: string) => void): Promise<number> {
  if (!options.module)
    throw new CliUsageError('replay-check needs --module <file> (the app module or the workflows to check). Run duraflow --help.');
  const workflows = await loadReplayWorkflows(options.module);
  const report = await replayCheck({
    ...workflows,
    ...(options.from ? { file: options.from } : { databaseUrl: options.url!, query: options.query, codec: options.codec }),
  });
  if (options.json) print(JSON.stringify(report, null, 2));
  else formatReplayReport(report, options.from ?? describeDatabase(options.url!)).forEach((line) => print(line));
  return report.diverged.length ? 1 : 0;
}

export function formatReplayReport(report: ReplayCheckReport, source: string): string[] {
  const run = (entry: { taskId: string; workflowName: string; version: number }) =>
    `${shown(entry.taskId)} (${shown(entry.workflowName)} v${shown(entry.version)})`;
  const lines = [
    `Replayed ${report.checked} recorded run${report.checked === 1 ? '' : 's'} from ${shown(source)}: ` +
      `${report.ok} ok, ${report.diverged.length} diverged, ${report.errors.length} could not be checked, ${report.skipped.length} skipped`,
  ];
  for (const diverged of report.diverged) {
    lines.push(
      `  DIVERGED ${run(diverged)}: recorded step "${shown(diverged.recordedStep)}", ` +
        (diverged.requestedStep === null
          ? 'but the code returned without asking for it'
          : `but the code asked for "${shown(diverged.requestedStep)}"`),
    );
  }
  for (const failed of report.errors) lines.push(`  NOT CHECKED ${run(failed)}: ${shown(failed.message)}`);
  for (const skipped of report.skipped) lines.push(`  SKIPPED ${run(skipped)}: this code has no such workflow version`);
  return lines;
}

export interface ExportRunsCommandOptions {
  out: string | undefined;
  /** Replace a file that is at `out` (never a symbolic link). */
  force: boolean;
  query: RecordedRunsQuery;
  codec?: PayloadCodec;
}

/** `duraflow export-runs --out file.json [--force]`: a new file, 0600, never through a link. */
export async function exportRunsCommand(url: string, options: ExportRunsCommandOptions, print: (line: string) => void) {
  const { out } = options;
  if (!out) throw new CliUsageError('export-runs needs --out <file.json>. Run duraflow --help.');
  const exported = await exportRecordedRuns(url, options.query, options.codec);
  await writePrivateFile(out, JSON.stringify(exported, null, 2), { replace: options.force });
  const runs = `${exported.runs.length} recorded run${exported.runs.length === 1 ? '' : 's'}`;
  print(`Exported ${runs} from ${shown(describeDatabase(url))} to ${shown(out)}`);
}
