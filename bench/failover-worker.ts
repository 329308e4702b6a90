/**
 * The entry of a failover bench worker process (bench/failover.ts): a Nest app with
 * DuraflowModule and the failover bench workflow on the address the failover moves, driven over
 * IPC (test/support/worker-ipc.ts). It watches what node-postgres answers (the probe below): the
 * statements that failed, the claims that were answered, and the writes the library was told had
 * committed (checkpoints, completions), with the time of each, for the bench to compare with
 * what the new primary holds.
 */
import 'reflect-metadata';
import { DynamicModule, Logger, Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Client, QueryResult } from 'pg';
import { DURAFLOW_ENTITIES, DuraflowModule } from '@duraflow/nestjs';
import { readWorkerConfig, runWorkerEntry, serveWorkerApp, WorkerConfig } from '../test/support/worker-ipc';
import { installQueryCounter, queryCounts } from './query-counter';
import { failoverBenchWorkflow, FailoverEffects } from './failover-workflows';

const logger = new Logger('FailoverBenchWorker');

export interface FailoverWorkerConfig extends WorkerConfig {
  /** The bench's effects database, on a server the failover never touches. */
  effectsUrl: string;
}

/** What the probe saw since the last `probe` request (times: ms since the epoch, this machine's clock). */
export interface FailoverProbe {
  /** Statements that failed: when, SQLSTATE or error code, statement name. */
  failures: Array<{ at: number; code: string; statement: string }>;
  /** Claims answered: when, tasks claimed. */
  claims: Array<{ at: number; claimed: number }>;
  /** Checkpoints the library was told were written: `task/step` → when the reply came. */
  checkpoints: Array<[string, number]>;
  /** Completions the library was told were written: task id → when. */
  completions: Array<[string, number]>;
}

let probe: FailoverProbe = { failures: [], claims: [], checkpoints: [], completions: [] };

type QueryConfig = { name?: string; text?: string; values?: unknown[] };

function statementOf(config: unknown): string {
  const text = typeof config === 'string' ? config : ((config as QueryConfig)?.text ?? '');
  const name = typeof config === 'object' && config ? (config as QueryConfig).name : undefined;
  return name || /^\s*\/\*\s*(\w+)\s*\*\//.exec(text)?.[1] || text.replace(/\s+/g, ' ').trim().slice(0, 40);
}

/** The last result of a multi-statement round trip (the claim sends its settings first). */
function lastResult(result: QueryResult | QueryResult[]): QueryResult {
  return Array.isArray(result) ? result[result.length - 1] : result;
}

function observe(statement: string, config: unknown, result: QueryResult | QueryResult[]): void {
  const at = Date.now();
  const last = lastResult(result);
  const values = typeof config === 'object' && config ? ((config as QueryConfig).values ?? []) : [];
  if (statement === 'duraflow_claim_tasks') probe.claims.push({ at, claimed: last.rows?.length ?? 0 });
  else if ((statement === 'duraflow_step_inserted' || statement === 'duraflow_step_completed') && last.rowCount) {
    probe.checkpoints.push([`${String(values[0])}/${String(values[1])}`, at]);
  } else if (statement === 'duraflow_steps_inserted') {
    for (const row of last.rows) probe.checkpoints.push([`${row.task_id}/${row.step_key}`, at]);
  } else if (statement === 'duraflow_complete_tasks') {
    for (const row of last.rows) probe.completions.push([row.id as string, at]);
  }
}

/** What the probe does with a statement's outcome. */
function settle(
  statement: string,
  config: unknown,
  error: { code?: string; message?: string } | null,
  result?: QueryResult | QueryResult[],
) {
  if (error) probe.failures.push({ at: Date.now(), code: error.code ?? String(error.message).slice(0, 40), statement });
  else if (result) observe(statement, config, result);
}

/**
 * Wraps node-postgres' Client.query to fill the probe, in both its forms: the promise (a pooled
 * client's query) and the callback (what the pool's own `query` passes).
 */
function installProbe(): void {
  const query = Client.prototype.query as (...args: unknown[]) => unknown;
  (Client.prototype as unknown as { query: (...args: unknown[]) => unknown }).query = function probedQuery(
    this: Client,
    ...args: unknown[]
  ) {
    const statement = statementOf(args[0]);
    const callback = args[args.length - 1];
    if (typeof callback === 'function') {
      args[args.length - 1] = (error: Error | null, result: QueryResult) => {
        settle(statement, args[0], error, result);
        return (callback as (...values: unknown[]) => unknown)(error, result);
      };
      return query.apply(this, args);
    }
    const returned = query.apply(this, args);
    if (returned && typeof (returned as Promise<unknown>).then === 'function') {
      (returned as Promise<QueryResult | QueryResult[]>).then(
        (result) => settle(statement, args[0], null, result),
        (error: { code?: string; message?: string }) => settle(statement, args[0], error ?? {}),
      );
    }
    return returned;
  };
}

installQueryCounter();
installProbe();

@Module({})
class FailoverBenchWorkerModule {
  static register(config: FailoverWorkerConfig, effects: FailoverEffects): DynamicModule {
    return {
      module: FailoverBenchWorkerModule,
      imports: [
        ScheduleModule.forRoot(),
        TypeOrmModule.forRoot({
          type: 'postgres',
          url: config.databaseUrl,
          entities: [...DURAFLOW_ENTITIES],
          retryAttempts: 2,
          retryDelay: 500,
        }),
        DuraflowModule.forRoot({ ...config.duraflow, workflows: [failoverBenchWorkflow(effects)] }),
      ],
    };
  }
}

export type FailoverWorkerRequest = { type: 'probe' } | { type: 'query-counts' };

async function handle(_app: unknown, request: FailoverWorkerRequest): Promise<unknown> {
  if (request.type === 'query-counts') return queryCounts();
  if (request.type === 'probe') {
    const seen = probe;
    probe = { failures: [], claims: [], checkpoints: [], completions: [] };
    return seen;
  }
  throw new Error(`Unknown request ${JSON.stringify(request)}`);
}

async function main(): Promise<void> {
  const config = readWorkerConfig<FailoverWorkerConfig>('through bench/failover.ts');
  await serveWorkerApp<FailoverWorkerRequest>({
    module: FailoverBenchWorkerModule.register(config, new FailoverEffects(config.effectsUrl)),
    logger,
    parent: 'bench',
    workerId: config.duraflow.workerId,
    handle,
  });
}

runWorkerEntry(logger, main);
