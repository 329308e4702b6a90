import { Inject, Injectable, OnModuleDestroy } from '@nestjs/common';
import type * as PromClient from 'prom-client';
import { loadPromClient } from '../dependencies/optional-dependencies';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { isTerminalStatus } from '../domain/task-status';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { DuraflowDatabase } from '../persistence/duraflow-database';
import { readMetricGauges } from '../persistence/sql/read-metric-gauges';
import { describeError } from '../util/describe-error';
import { DuraflowLogger } from './duraflow-logger';
import { DuraflowMetricsRegistry } from '../config/metrics.options';

/** The outcome labels of step attempts and compensations. */
export type StepAttemptOutcome = 'completed' | 'failed' | 'stopped';
export type CompensationOutcome = 'compensated' | 'failed' | 'stopped';

const SECONDS_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
const CLAIM_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
const WAIT_BUCKETS = [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600];

/** How the metrics of one module are made: each registered in its registry, under its prefix. */
function instrumentMakers(client: typeof PromClient, registry: PromClient.Registry, prefix: string, readGauges: () => Promise<Gauges>) {
  const registers = [registry];
  const name = (suffix: string) => {
    registry.removeSingleMetric(prefix + suffix); // a module booted again in this process (tests) replaces its metrics
    return prefix + suffix;
  };
  return {
    counter: <L extends string>(suffix: string, help: string, labelNames: readonly L[]) =>
      new client.Counter<L>({ name: name(suffix), help, labelNames, registers }),
    histogram: <L extends string>(suffix: string, help: string, labelNames: readonly L[], buckets: number[]) =>
      new client.Histogram<L>({ name: name(suffix), help, labelNames, buckets, registers }),
    gauge: <L extends string>(
      suffix: string,
      help: string,
      labelNames: readonly L[],
      fill: (gauge: PromClient.Gauge<L>, g: NonNullable<Gauges>) => void,
    ) =>
      new client.Gauge<L>({
        name: name(suffix),
        help,
        labelNames,
        registers,
        async collect() {
          this.reset();
          const gauges = await readGauges();
          if (gauges) fill(this, gauges);
        },
      }),
  };
}

/** Every metric of one module, registered in one registry. */
function createInstruments(client: typeof PromClient, registry: PromClient.Registry, prefix: string, readGauges: () => Promise<Gauges>) {
  const { counter, histogram, gauge } = instrumentMakers(client, registry, prefix, readGauges);
  return {
    tasksFinished: counter('tasks_finished_total', 'Tasks that reached a final status, by workflow and outcome.', ['workflow', 'outcome']),
    runs: counter('runs_total', 'Runs (executions of a claimed task) by workflow and how they ended.', ['workflow', 'outcome']),
    runDuration: histogram(
      'run_duration_seconds',
      'Duration of a run, claim to recorded outcome.',
      ['workflow', 'outcome'],
      SECONDS_BUCKETS,
    ),
    stepDuration: histogram('step_duration_seconds', 'Duration of a step attempt.', ['workflow', 'step', 'outcome'], SECONDS_BUCKETS),
    compensations: counter('compensations_total', 'Compensations run (each with its retries), by outcome.', [
      'workflow',
      'step',
      'outcome',
    ]),
    deadLetters: counter('dead_letters_total', 'Dead letters written by rollbacks (compensations that failed for good).', ['workflow']),
    claimDuration: histogram('claim_duration_seconds', 'Duration of one claim statement (the claim latency).', [], CLAIM_BUCKETS),
    claimedTasks: counter('tasks_claimed_total', 'Tasks claimed by this process.', ['workflow']),
    claimFailures: counter('claim_failures_total', 'Claim statements that failed (database unreachable).', []),
    taskWait: histogram(
      'task_wait_seconds',
      'Time a task waited from runnable (created or scheduled_at) to its first claim.',
      ['workflow'],
      WAIT_BUCKETS,
    ),
    heartbeatFailures: counter('heartbeat_failures_total', 'Heartbeat statements that failed (database unreachable).', []),
    writeFailures: counter(
      'write_failures_total',
      'Fenced writes of a run (checkpoint, completion, failure, rollback) that failed for good after their outage retries; the run ends unrecorded.',
      ['workflow'],
    ),
    reaperActions: counter('reaper_actions_total', 'Stale tasks the reaper handled, by action: requeued, rolling_back, ended.', ['action']),
    gauges: [
      gauge('tasks', 'Unfinished tasks by workflow and status (pending, running), read at scrape time.', ['workflow', 'status'], (g, s) => {
        for (const row of s.tasks) g.set({ workflow: row.workflowName, status: row.status }, row.count);
      }),
      gauge(
        'oldest_pending_age_seconds',
        'Age of the oldest runnable pending task, by workflow, read at scrape time.',
        ['workflow'],
        (g, s) => {
          for (const row of s.oldestPendingSeconds) g.set({ workflow: row.workflowName }, row.seconds);
        },
      ),
      gauge('dead_letters', 'Open dead letters by workflow, read at scrape time.', ['workflow'], (g, s) => {
        for (const row of s.deadLetters) g.set({ workflow: row.workflowName ?? '' }, row.count);
      }),
    ],
  };
}

type Instruments = ReturnType<typeof createInstruments>;
type Gauges = Awaited<ReturnType<typeof readMetricGauges>> | undefined;

/**
 * Duraflow's Prometheus metrics (the `metrics` option; off by default). Counters and histograms
 * move with events; the gauges are read by one statement when the registry is scraped (their
 * `collect`), shared by the three of them, never per event. Off, every method is a no-op.
 * Serve `metrics()` with `contentType` on a route of your own, or pass your registry and serve that.
 */
@Injectable()
export class DuraflowMetrics implements OnModuleDestroy {
  private readonly logger = new DuraflowLogger();
  private readonly instruments: Instruments | undefined;
  private readonly promRegistry: PromClient.Registry | undefined;
  private scrape: Promise<Gauges> | undefined;
  private scrapeFailing = false;

  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) options: ResolvedDuraflowOptions,
    private readonly db: DuraflowDatabase,
    private readonly workflows: WorkflowRegistry,
  ) {
    if (!options.metrics) return;
    const client = loadPromClient();
    this.promRegistry = (options.metrics.registry as PromClient.Registry | undefined) ?? client.register;
    this.instruments = createInstruments(client, this.promRegistry, options.metrics.prefix, () => this.readGauges());
  }

  /** True when the `metrics` option turned them on. */
  get enabled(): boolean {
    return this.instruments !== undefined;
  }

  /** The registry holding the metrics (the one passed, else prom-client's global one); undefined when off. */
  get registry(): DuraflowMetricsRegistry | undefined {
    return this.promRegistry;
  }

  /** The exposition format's content type, for the `Content-Type` of a /metrics response. */
  get contentType(): string {
    return this.promRegistry?.contentType ?? 'text/plain; version=0.0.4; charset=utf-8';
  }

  /** Every metric of the registry in the text exposition format (the gauges read now); '' when off. */
  async metrics(): Promise<string> {
    return this.promRegistry ? this.promRegistry.metrics() : '';
  }

  onModuleDestroy(): void {
    if (!this.instruments || !this.promRegistry) return;
    for (const metric of [...Object.values(this.instruments).filter((m) => !Array.isArray(m)), ...this.instruments.gauges]) {
      this.promRegistry.removeSingleMetric((metric as unknown as { name: string }).name);
    }
  }

  /**
   * One run ended. Only a run that left its task in a terminal status finished the task: a run
   * that suspended (a sleep, a signal or a child wait), was held by the determinism guard, was
   * stopped or could not record its outcome leaves the task to a later run.
   */
  runEnded(workflow: string, outcome: string, seconds: number): void {
    const m = this.instruments;
    if (!m) return;
    m.runs.inc({ workflow, outcome });
    m.runDuration.observe({ workflow, outcome }, seconds);
    if (outcome === 'unrecorded') m.writeFailures.inc({ workflow });
    else if (isTerminalStatus(outcome)) m.tasksFinished.inc({ workflow, outcome });
  }

  /** A task the reaper ended (out of retries): counted as finished with its final status. */
  taskFinished(workflow: string, outcome: string): void {
    this.instruments?.tasksFinished.inc({ workflow, outcome });
  }

  stepAttempt(workflow: string, step: string, outcome: StepAttemptOutcome, seconds: number): void {
    this.instruments?.stepDuration.observe({ workflow, step, outcome }, seconds);
  }

  /** A compensation that ran; one that failed for good in a rollback (`deadLetterOnFailure`) wrote a dead letter. */
  compensation(workflow: string, step: string, outcome: CompensationOutcome, deadLetterOnFailure = true): void {
    const m = this.instruments;
    if (!m) return;
    m.compensations.inc({ workflow, step, outcome });
    if (outcome === 'failed' && deadLetterOnFailure) m.deadLetters.inc({ workflow });
  }

  /** One claim statement: how long it took and, for tasks claimed for the first time, how long they had waited. */
  claimed(seconds: number, tasks: Array<{ workflowName: string; waitedSeconds: number | null }>): void {
    const m = this.instruments;
    if (!m) return;
    m.claimDuration.observe(seconds);
    for (const task of tasks) {
      m.claimedTasks.inc({ workflow: task.workflowName });
      if (task.waitedSeconds !== null) m.taskWait.observe({ workflow: task.workflowName }, Math.max(0, task.waitedSeconds));
    }
  }

  claimFailed(): void {
    this.instruments?.claimFailures.inc();
  }

  heartbeatFailed(): void {
    this.instruments?.heartbeatFailures.inc();
  }

  reaped(action: 'requeued' | 'rolling_back' | 'ended', count: number): void {
    if (count) this.instruments?.reaperActions.inc({ action }, count);
  }

  /** One statement for the three gauges of a scrape: the first gauge's collect starts it, the others share it. */
  private readGauges(): Promise<Gauges> {
    this.scrape ??= readMetricGauges(this.db)
      .then((gauges) => {
        if (this.scrapeFailing) this.logger.log('Reading the metric gauges works again');
        this.scrapeFailing = false;
        return this.withRegisteredWorkflows(gauges);
      })
      .catch((error: unknown): Gauges => {
        if (!this.scrapeFailing) this.logger.warn(`Reading the metric gauges failed (${describeError(error).message}); they are left out`);
        this.scrapeFailing = true;
        return undefined;
      })
      .finally(() => (this.scrape = undefined));
    return this.scrape;
  }

  /** The workflows this process runs appear with 0 when they have nothing pending or running. */
  private withRegisteredWorkflows(gauges: NonNullable<Gauges>): NonNullable<Gauges> {
    for (const workflowName of this.workflows.names()) {
      for (const status of ['pending', 'running'] as const) {
        if (!gauges.tasks.some((row) => row.workflowName === workflowName && row.status === status)) {
          gauges.tasks.push({ workflowName, status, count: 0 });
        }
      }
      if (!gauges.oldestPendingSeconds.some((row) => row.workflowName === workflowName)) {
        gauges.oldestPendingSeconds.push({ workflowName, seconds: 0 });
      }
    }
    return gauges;
  }
}
