import { TestingModule } from '@nestjs/testing';
import { AgentTask, StepRun, WorkflowService } from '@duraflow/nestjs';
import {
  startWorkerProcess,
  stopAllWorkerProcesses,
  WorkerProcess,
  WorkerProcessOptions,
} from '../support/child-process';
import { TestDatabase } from '../support/database';
import { SHARED_REDIS_URL } from '../support/redis-server';
import { TableRows } from '../support/table-rows';
import { TestBed, useTestBed } from '../support/test-bed';
import { sleep } from '../support/waiting';
import { CHAOS_TABLES_SQL, ChaosEffects } from './effects';
import { ChaosDuraflowOptions, ChaosScenarioName } from './protocol';
import { chaosScenario } from './scenarios';

/** The timing knobs of one chaos test file: short, so a dead worker is noticed in about a second. */
export interface ChaosTimings {
  heartbeatIntervalMs: number;
  staleAfterMs: number;
  reaperIntervalMs: number;
}

export const CHAOS_TIMINGS: ChaosTimings = { heartbeatIntervalMs: 100, staleAfterMs: 1_000, reaperIntervalMs: 200 };

export interface ChaosEffectRow {
  task_id: string;
  step_key: string;
  worker_id: string;
  pid: number;
}

export interface ChaosCompensationRow {
  task_id: string;
  step_key: string;
  output: unknown;
  worker_id: string;
  pid: number;
}

/**
 * One chaos test's world, on a test bed with a database per test: the chaos tables, a control
 * app in the test process (submit-only: it submits, waits and reads through the library, and
 * runs no workflow), and worker processes started on that database. After the test every
 * worker is killed, then the bed closes the app and drops the database.
 */
export function useChaosBed(scenarios: ChaosScenarioName[], timings: ChaosTimings = CHAOS_TIMINGS): ChaosBed {
  const chaos = new ChaosBed(useTestBed({ databasePerTest: true }), scenarios, timings);
  beforeEach(() => chaos.setUp());
  return chaos;
}

export class ChaosBed {
  control: TestingModule;
  workflows: WorkflowService;

  constructor(
    private readonly bed: TestBed,
    private readonly scenarios: ChaosScenarioName[],
    readonly timings: ChaosTimings = CHAOS_TIMINGS,
  ) {}

  get db(): TestDatabase {
    return this.bed.db;
  }

  get rows(): TableRows {
    return this.bed.rows;
  }

  async setUp(): Promise<void> {
    await this.db.client.query(CHAOS_TABLES_SQL);
    // The control app registers the scenarios only so that submit knows their names.
    const effects = new ChaosEffects(this.db.url, 'test-control');
    const scenario = chaosScenario(this.scenarios, effects);
    this.control = await this.bed.start({
      duraflow: {
        worker: { enabled: false },
        reaper: { enabled: false, staleAfterMs: this.timings.staleAfterMs },
        workflows: scenario.workflows,
      },
      providers: [{ provide: ChaosEffects, useValue: effects }, ...scenario.providers],
    });
    this.workflows = this.control.get(WorkflowService);
    // Opened after the control app, so closed before it: no worker outlives the test.
    this.bed.closeLater({ close: stopAllWorkerProcesses });
  }

  /** DuraflowModule options every chaos worker gets: fast heartbeat, an enabled reaper, Redis. */
  workerOptions(): ChaosDuraflowOptions {
    return {
      heartbeatIntervalMs: this.timings.heartbeatIntervalMs,
      worker: { concurrency: 10, pollIntervalMs: 100, shutdownTimeoutMs: 1_000 },
      reaper: {
        enabled: true,
        intervalMs: this.timings.reaperIntervalMs,
        staleAfterMs: this.timings.staleAfterMs,
        leaderTtlMs: 1_000,
        // Test files run in parallel on one Redis: each elects its own leader.
        leaderKey: `duraflow:reaper:leader:${this.db.name}`,
      },
      redis: { url: SHARED_REDIS_URL },
    };
  }

  /** A worker process on this bed's database, with `workerOptions()` under `options.duraflow`. */
  startWorker(options: Omit<WorkerProcessOptions, 'databaseUrl' | 'scenario'> & { scenario?: ChaosScenarioName[] }): WorkerProcess {
    const defaults = this.workerOptions();
    return startWorkerProcess({
      ...options,
      databaseUrl: this.db.url,
      scenario: options.scenario ?? this.scenarios,
      duraflow: {
        ...defaults,
        ...options.duraflow,
        worker: { ...defaults.worker, ...options.duraflow?.worker },
        reaper: { ...defaults.reaper, ...options.duraflow?.reaper },
      },
    });
  }

  /**
   * Keeps `alive` workers running (`start(n)` makes the n-th; a spare is booted before it is
   * needed) and starts another each time one dies, until `done()` holds. Returns every worker
   * it started.
   */
  async superviseWorkers(
    start: (n: number) => WorkerProcess,
    done: () => Promise<boolean>,
    { alive, timeoutMs }: { alive: number; timeoutMs: number },
  ): Promise<WorkerProcess[]> {
    const started: WorkerProcess[] = [];
    const deadline = Date.now() + timeoutMs;
    while (!(await done())) {
      if (Date.now() > deadline) throw new Error(`superviseWorkers: not done after ${timeoutMs} ms and ${started.length} worker(s)`);
      while (started.filter((worker) => worker.alive).length < alive) started.push(start(started.length + 1));
      await sleep(50);
    }
    return started;
  }

  async task(id: string): Promise<AgentTask> {
    const task = await this.workflows.get(id);
    if (!task) throw new Error(`No task ${id}`);
    return task;
  }

  steps(taskId: string): Promise<StepRun[]> {
    return this.workflows.getSteps(taskId);
  }

  async effects(taskId?: string): Promise<ChaosEffectRow[]> {
    const { rows } = await this.db.client.query<ChaosEffectRow>(
      `SELECT task_id, step_key, worker_id, pid FROM chaos_effects WHERE $1::uuid IS NULL OR task_id = $1 ORDER BY id`,
      [taskId ?? null],
    );
    return rows;
  }

  async compensations(taskId: string): Promise<ChaosCompensationRow[]> {
    const { rows } = await this.db.client.query<ChaosCompensationRow>(
      `SELECT task_id, step_key, output, worker_id, pid FROM chaos_compensations WHERE task_id = $1 ORDER BY id`,
      [taskId],
    );
    return rows;
  }
}
