import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { DynamicModule, Type } from '@nestjs/common';
import { Client } from 'pg';
import { PayloadCoder } from '../codec/payload-coder';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { PayloadCodec } from '../domain/payload-codec';
import { ReplayCheckInputError } from '../domain/errors';
import { readRecordedRuns, RecordedRunsQuery } from './read-recorded-runs';
import { RECORDED_RUNS_FORMAT, RecordedRun, RecordedRunsFile } from './recorded-run';
import { ReplayOutcome, replayRun } from './replay-run';
import {
  definitionWorkflows,
  isNestModule,
  moduleWorkflows,
  registryWorkflows,
  ReplayableWorkflows,
  ReplayWorkflowSource,
  workflowSourcesOf,
} from './replay-workflows';

export interface ReplayCheckOptions {
  /** Today's code: functional definitions and @Workflow classes (constructed without their dependencies). */
  workflows?: ReplayWorkflowSource[];
  /** Or the host's Nest module, booted without its worker and reaper: its workflows with their DI. */
  module?: Type | DynamicModule;
  /** Or the registry of an app the caller booted (`app.get(WorkflowRegistry)`). */
  registry?: WorkflowRegistry;
  /** The recorded runs themselves, */
  runs?: RecordedRun[];
  /** or read from this database, */
  databaseUrl?: string;
  /** or from this file written by `duraflow export-runs`. */
  file?: string;
  /** Which runs a database gives: default, the unfinished ones that recorded steps (at most 1000). */
  query?: RecordedRunsQuery;
  /** The codec the runs' payloads were stored with (`aesGcmCodec`), to decode what a database gives. Default: none (plain JSON). */
  codec?: PayloadCodec;
  /** How long one replay may take before it counts as an error (it awaits something outside steps). Default 5000 ms. */
  timeoutMs?: number;
}

export type ReplayRunResult = ReplayOutcome & { taskId: string; workflowName: string; version: number };

export interface ReplayCheckReport {
  /** Runs replayed. */
  checked: number;
  ok: number;
  /** Runs whose recorded path today's code does not take: a deploy would hold them. */
  diverged: Array<Extract<ReplayRunResult, { result: 'diverged' }>>;
  /** Runs whose replay threw outside any step or did not finish in time. */
  errors: Array<Extract<ReplayRunResult, { result: 'error' }>>;
  /** Runs of a workflow or version today's code does not have (no worker of it would claim them). */
  skipped: Array<{ taskId: string; workflowName: string; version: number }>;
  results: ReplayRunResult[];
}

/**
 * Replays recorded runs against today's workflow code without running any step body (saved
 * outputs are fed back) and reports each run whose path diverges, with the steps: what the
 * determinism guard would hold after a deploy of this code. For CI: `npx duraflow replay-check`.
 */
export async function replayCheck(options: ReplayCheckOptions): Promise<ReplayCheckReport> {
  const runs = await recordedRunsOf(options);
  const workflows = await workflowsOf(options);
  const timeoutMs = options.timeoutMs ?? 5_000;
  const report: ReplayCheckReport = { checked: 0, ok: 0, diverged: [], errors: [], skipped: [], results: [] };
  try {
    for (const run of runs) {
      const version = run.workflowVersion ?? 1;
      const code = workflows.find(run.workflowName, version);
      const identity = { taskId: run.taskId, workflowName: run.workflowName, version };
      if (!code) {
        report.skipped.push(identity);
        continue;
      }
      const result = { ...identity, ...(await replayRun(run, code, { timeoutMs })) } as ReplayRunResult;
      report.checked++;
      report.results.push(result);
      if (result.result === 'ok') report.ok++;
      else if (result.result === 'diverged') report.diverged.push(result);
      else report.errors.push(result);
    }
  } finally {
    await workflows.close();
  }
  return report;
}

/** Reads recorded runs from a database, for `export-runs` (and the check). */
export async function exportRecordedRuns(
  databaseUrl: string,
  query: RecordedRunsQuery = {},
  codec?: PayloadCodec,
): Promise<RecordedRunsFile> {
  return {
    format: RECORDED_RUNS_FORMAT,
    formatVersion: 1,
    exportedAt: new Date().toISOString(),
    runs: await readRunsFrom(databaseUrl, query, codec),
  };
}

/**
 * The workflows a file exports, for `replay-check --module`: `#Name` picks one export; else a
 * Nest module among the exports is booted (replay mode), or every definition and @Workflow class
 * exported is used.
 */
export async function loadReplayWorkflows(modulePath: string): Promise<ReplayCheckOptions> {
  const [file, exportName] = modulePath.split('#');
  let loaded: Record<string, unknown>;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    loaded = require(path.resolve(file));
  } catch (error) {
    throw new ReplayCheckInputError(`could not load ${file}: ${(error as Error).message.split('\n')[0]}`);
  }
  const exports = exportName ? [loaded[exportName]] : Object.values(loaded);
  if (exportName && loaded[exportName] === undefined) throw new ReplayCheckInputError(`${file} exports nothing named ${exportName}.`);
  const modules = exports.filter(isNestModule);
  if (modules.length === 1 || (exportName && modules.length)) return { module: modules[0] };
  const workflows = workflowSourcesOf(exports);
  if (!workflows.length) {
    throw new ReplayCheckInputError(
      modules.length
        ? `${file} exports several Nest modules: name one, as ${file}#AppModule.`
        : `${file} exports no Nest module, no workflow(name, fn) definition and no @Workflow class.`,
    );
  }
  return { workflows };
}

async function workflowsOf(options: ReplayCheckOptions): Promise<ReplayableWorkflows> {
  const given = [options.workflows, options.module, options.registry].filter((source) => source !== undefined);
  if (given.length !== 1) throw new ReplayCheckInputError('give exactly one of workflows, module and registry.');
  if (options.registry) return registryWorkflows(options.registry);
  if (options.module) return moduleWorkflows(options.module);
  return definitionWorkflows(options.workflows!);
}

async function recordedRunsOf(options: ReplayCheckOptions): Promise<RecordedRun[]> {
  const given = [options.runs, options.databaseUrl, options.file].filter((source) => source !== undefined);
  if (given.length !== 1) throw new ReplayCheckInputError('give exactly one of runs, databaseUrl and file.');
  if (options.runs) return options.runs;
  if (options.databaseUrl) return readRunsFrom(options.databaseUrl, options.query, options.codec);
  return readRunsFile(options.file!);
}

async function readRunsFrom(databaseUrl: string, query?: RecordedRunsQuery, codec?: PayloadCodec): Promise<RecordedRun[]> {
  const client = new Client({ connectionString: databaseUrl });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await readRecordedRuns(
      {
        query: async (text, values) => {
          const result = await client.query(text, values);
          return { rows: result.rows, rowCount: result.rowCount ?? 0 };
        },
      },
      query,
      new PayloadCoder({ codec }),
    );
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function readRunsFile(file: string): Promise<RecordedRun[]> {
  let parsed: Partial<RecordedRunsFile>;
  try {
    parsed = JSON.parse(await readFile(file, 'utf8'));
  } catch (error) {
    throw new ReplayCheckInputError(`could not read ${file}: ${(error as Error).message}`);
  }
  if (parsed?.format !== RECORDED_RUNS_FORMAT || !Array.isArray(parsed.runs)) {
    throw new ReplayCheckInputError(`${file} is not a file written by duraflow export-runs.`);
  }
  return parsed.runs;
}
