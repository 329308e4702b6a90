import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Pool } from 'pg';
import { FunctionalWorkflowDefinition, workflow, WorkflowContext } from '@duraflow/nestjs';
import { sleep } from '../test/support/waiting';

/**
 * The workflow of the failover bench (bench/failover.ts). Its step bodies and compensations
 * record each run in `failover_effects` of a database on ANOTHER server than the pair that fails
 * over (the shared PostgreSQL of the bench), so a body's run is on record whatever the failover
 * lost: a checkpoint the worker was told was written and that is missing after promotion shows
 * up as a second run of its body.
 */
export const FAILOVER_EFFECTS_SQL = `
  CREATE TABLE failover_effects (
    id bigserial PRIMARY KEY,
    task_id uuid NOT NULL,
    step_key text NOT NULL,
    kind text NOT NULL,
    pid int NOT NULL,
    at_ms double precision NOT NULL
  );
  CREATE INDEX ON failover_effects (task_id, step_key);
`;

export const FAILOVER_BENCH_WORKFLOW = 'failover-bench';

/**
 * `steps`: s1..s4. `saga`: s1, s2, then s3 throws: s2 and s1 are compensated (rolled_back).
 * `sleep`: s1, a 300 ms durable sleep, s2. `signal`: s1, a wait for signal 'go', s2.
 * `timed`: 20 no-op steps, each timed around `ctx.step.run` (the output lists the times, ms).
 */
export type FailoverBenchKind = 'steps' | 'saga' | 'sleep' | 'signal' | 'timed';

/** The steps each kind ends with completed (the saga's s3 fails by design). */
export const PLANNED_STEPS: Record<Exclude<FailoverBenchKind, 'timed'>, string[]> = {
  steps: ['s1', 's2', 's3', 's4'],
  saga: ['s1', 's2'],
  sleep: ['s1', 's2'],
  signal: ['s1', 's2'],
};

/** The status each kind ends in. */
export const FINAL_STATUS: Record<FailoverBenchKind, string> = {
  steps: 'completed',
  saga: 'rolled_back',
  sleep: 'completed',
  signal: 'completed',
  timed: 'completed',
};

export interface FailoverBenchInput {
  kind: FailoverBenchKind;
  n: number;
}

/** Writes effect rows on the bench's own server (never the pair), retrying a few times. */
export class FailoverEffects {
  private readonly pool: Pool;

  constructor(effectsUrl: string) {
    this.pool = new Pool({ connectionString: effectsUrl, max: 4 });
    this.pool.on('error', () => undefined);
  }

  async record(taskId: string, stepKey: string, kind: 'step' | 'compensation'): Promise<void> {
    const at = performance.timeOrigin + performance.now();
    for (let attempt = 0; ; attempt++) {
      try {
        await this.pool.query(`INSERT INTO failover_effects (task_id, step_key, kind, pid, at_ms) VALUES ($1, $2, $3, $4, $5)`, [
          taskId,
          stepKey,
          kind,
          process.pid,
          at,
        ]);
        return;
      } catch (error) {
        if (attempt > 20) throw error;
        await sleep(100);
      }
    }
  }
}

export function failoverBenchWorkflow(effects: FailoverEffects): FunctionalWorkflowDefinition {
  const step = (ctx: WorkflowContext<FailoverBenchInput>, key: string, fails = false) =>
    ctx.step.run(key, async () => {
      await effects.record(ctx.runId, key, 'step');
      // Long enough that a failover finds runs in the middle of their steps.
      await sleep(20);
      if (fails) throw new Error(`${FAILOVER_BENCH_WORKFLOW}: step ${key} fails by design`);
      return { key, token: randomUUID() };
    });
  const compensate = (key: string) => async (_output: unknown, ctx: { runId: string }) => effects.record(ctx.runId, key, 'compensation');
  return workflow(
    FAILOVER_BENCH_WORKFLOW,
    async (ctx: WorkflowContext<FailoverBenchInput>) => {
      if (ctx.input.kind === 'timed') return { ms: await timedSteps(ctx) };
      await step(ctx, 's1');
      switch (ctx.input.kind) {
        case 'steps':
          await step(ctx, 's2');
          await step(ctx, 's3');
          await step(ctx, 's4');
          break;
        case 'saga':
          await step(ctx, 's2');
          await step(ctx, 's3', true);
          break;
        case 'sleep':
          await ctx.sleep('nap', 300);
          await step(ctx, 's2');
          break;
        case 'signal':
          await ctx.waitForSignal('go');
          await step(ctx, 's2');
          break;
      }
      return { n: ctx.input.n };
    },
    { compensations: { s1: compensate('s1'), s2: compensate('s2'), s3: compensate('s3') } },
  );
}

/** 20 no-op steps, each timed from the call to its return (its checkpoint's commit included). */
async function timedSteps(ctx: WorkflowContext<FailoverBenchInput>): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < 20; i++) {
    const started = performance.now();
    await ctx.step.run(`t${i}`, () => Promise.resolve(i));
    times.push(performance.now() - started);
  }
  return times;
}
