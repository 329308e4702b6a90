import { performance } from 'node:perf_hooks';
import { WorkflowService } from '@duraflow/nestjs';
import { BenchContext, rawSection } from '../context';
import { median, progress, quantile } from '../stats';
import { captureStoreCall } from '../sql-capture';
import { PROBE_WORKFLOW, RunProbe } from '../workflows';

/** One probe run on the idle in-process worker, timed on this process's clock. */
interface ProbeTiming {
  /** submit() called -> first line of the run function. */
  submitToStartMs: number;
  /** First line -> last line of the run function (the steps themselves). */
  runMs: number;
  /** submit() called -> waitFor() saw the task completed. */
  submitToTerminalMs: number;
}

class ProbeRunner {
  private nextSample = 1;

  constructor(
    private readonly workflows: WorkflowService,
    private readonly probe: RunProbe,
  ) {}

  /** Submits one probe task and waits until it is completed, so the worker is idle again. */
  async run(steps: number): Promise<ProbeTiming> {
    const sample = this.nextSample++;
    const start = this.probe.startOf(sample);
    const end = this.probe.endOf(sample);
    const submittedAt = performance.now();
    const task = await this.workflows.submit(PROBE_WORKFLOW, { steps, sample });
    const done = await this.workflows.waitFor(task.id, { timeoutMs: 30_000, pollIntervalMs: 50 });
    const terminalAt = performance.now();
    if (done.status !== 'completed') throw new Error(`probe task ${task.id} ended ${done.status}: ${JSON.stringify(done.error)}`);
    const [startedAt, endedAt] = await Promise.all([start, end]);
    return { submitToStartMs: startedAt - submittedAt, runMs: endedAt - startedAt, submitToTerminalMs: terminalAt - submittedAt };
  }
}

/**
 * Needs the in-process worker started and nothing else queued. Submit -> start latency, then
 * the per-step overhead: (10-step run - 3-step run) / 7, p50 over the runs.
 */
export async function idleWorkerScenario(ctx: BenchContext, workflows: WorkflowService, probe: RunProbe): Promise<void> {
  const { sizes } = ctx;
  const runner = new ProbeRunner(workflows, probe);

  progress(`submit -> start latency: ${sizes.latencySamples} sequential samples (+${sizes.latencyWarmup} warm-up)`);
  for (let i = 0; i < sizes.latencyWarmup; i++) await runner.run(0);
  const latencies: number[] = [];
  for (let i = 0; i < sizes.latencySamples; i++) latencies.push((await runner.run(0)).submitToStartMs);
  rawSection(ctx, 'latency').samplesMs = latencies;
  const note = `${latencies.length} samples, same process; min ${latencies.reduce((a, b) => Math.min(a, b)).toFixed(2)} ms, max ${latencies.reduce((a, b) => Math.max(a, b)).toFixed(2)} ms`;
  ctx.results.set('latency.p50', quantile(latencies, 0.5), note);
  ctx.results.set('latency.p95', quantile(latencies, 0.95), `${latencies.length} samples`);

  progress(
    `per-step overhead: ${sizes.stepOverheadRuns} runs of 10-step and 3-step (after a ${sizes.stepOverheadWarmupSteps}-step run and ${sizes.stepOverheadWarmup} pairs)`,
  );
  await runner.run(sizes.stepOverheadWarmupSteps);
  for (let i = 0; i < sizes.stepOverheadWarmup; i++) {
    await runner.run(10);
    await runner.run(3);
  }
  const floor = await CheckpointFloor.create(ctx);
  const floorSamples: number[] = [];
  const perStepRun: number[] = [];
  const perStepE2e: number[] = [];
  const runs: Array<{ ten: ProbeTiming; three: ProbeTiming }> = [];
  for (let i = 0; i < sizes.stepOverheadRuns; i++) {
    // Alternate the order, so a drift of the machine does not favour one of the two.
    let ten: ProbeTiming;
    let three: ProbeTiming;
    if (i % 2 === 0) {
      ten = await runner.run(10);
      three = await runner.run(3);
    } else {
      three = await runner.run(3);
      ten = await runner.run(10);
    }
    runs.push({ ten, three });
    floorSamples.push(...(await floor.sample(10)));
    perStepRun.push((ten.runMs - three.runMs) / 7);
    perStepE2e.push((ten.submitToTerminalMs - three.submitToTerminalMs) / 7);
  }
  Object.assign(rawSection(ctx, 'stepOverhead'), { runs, perStepRunMs: perStepRun, perStepSubmitToTerminalMs: perStepE2e });
  ctx.results.set(
    'step.overhead.run',
    median(perStepRun),
    `${runs.length} runs; 10-step run ${median(runs.map((r) => r.ten.runMs)).toFixed(2)} ms p50`,
  );
  rawSection(ctx, 'stepOverhead').checkpointStatementMs = floorSamples;
  ctx.results.set(
    'step.floor',
    median(floorSamples),
    `${floorSamples.length} statements, 10 after each pair of runs; StepStore's own SQL for a lone checkpoint, each its own commit, on one connection`,
  );
  const ratio = median(perStepRun) / median(floorSamples);
  ctx.results.set(
    'step.ratio',
    ratio,
    `${ratio <= 1.15 ? 'within' : 'OVER'} the 1.15 target: what the step runner adds to its one statement`,
  );
  ctx.results.set(
    'step.overhead.e2e',
    median(perStepE2e),
    `${runs.length} runs; 10-step task ${median(runs.map((r) => r.ten.submitToTerminalMs)).toFixed(2)} ms p50`,
  );
}

/**
 * The floor of the per-step overhead: the statement a lone step checkpoint sends (StepStore's
 * own SQL, captured), run from node-postgres on one connection, each its own commit, for a
 * running task claimed past the library. What the per-step overhead adds to it is the runner.
 */
class CheckpointFloor {
  private next = 1;

  private constructor(
    private readonly ctx: BenchContext,
    private readonly taskId: string,
    private readonly claimToken: string,
  ) {}

  static async create(ctx: BenchContext): Promise<CheckpointFloor> {
    const { rows } = await ctx.db.client.query<{ id: string; claim_token: string }>(
      `INSERT INTO agent_tasks (workflow_name, status, claim_token, worker_id, started_at, heartbeat_at)
       VALUES ('bench-floor', 'running', gen_random_uuid(), 'bench', now(), now()) RETURNING id, claim_token`,
    );
    return new CheckpointFloor(ctx, rows[0].id, rows[0].claim_token);
  }

  /** Runs `count` checkpoints (new step keys), one after the other; their latencies in ms. */
  async sample(count: number): Promise<number[]> {
    const samples: number[] = [];
    for (let i = 0; i < count; i++) {
      const n = this.next++;
      const step = {
        taskId: this.taskId,
        claimToken: this.claimToken,
        stepKey: `floor-${n}`,
        outputJson: null,
        compensationFn: null,
        attempt: 1,
        startedAt: new Date(),
        completionSeq: n,
      };
      const statements = await captureStoreCall('steps', 'insertCompletedSteps', [[step]]);
      if (!statements?.length) throw new Error('StepStore.insertCompletedSteps sent no statement: update bench/scenarios/idle-worker.ts');
      const [statement] = statements;
      const started = performance.now();
      const result = await this.ctx.db.client.query({ name: statement.name, text: statement.text, values: statement.values });
      samples.push(performance.now() - started);
      if (result.rowCount !== 1) throw new Error(`the checkpoint statement wrote ${result.rowCount} rows, expected 1`);
    }
    return samples;
  }
}
