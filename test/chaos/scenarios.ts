import { randomUUID } from 'node:crypto';
import { Provider } from '@nestjs/common';
import { CompensationContext, FunctionalWorkflowDefinition, Workflow, workflow, WorkflowContext } from '@duraflow/nestjs';
import { sleep } from '../../libs/duraflow/src/util/sleep';
import { ChaosEffects } from './effects';
import { ChaosScenarioName } from './protocol';

/**
 * The workflows chaos workers run. Every step body and compensation records what it did in
 * the chaos tables (effects.ts) before anything else, so the test can count real executions.
 */
export interface ChaosScenario {
  workflows: FunctionalWorkflowDefinition[];
  /** Decorated workflow classes (they get ChaosEffects by constructor injection). */
  providers: Provider[];
}

export interface ChaosStepsInput {
  steps: number;
  /** How long each step sleeps after recording its effect (it stops early when its signal aborts). */
  stepMs: number;
}

/**
 * 'chaos-steps': steps s1..sN, each records an effect, sleeps `stepMs` and returns `{ n }`.
 * A decorated class, so a child boots only with the decorator metadata Nest DI needs.
 */
@Workflow('chaos-steps')
export class ChaosStepsWorkflow {
  constructor(private readonly effects: ChaosEffects) {}

  async run(ctx: WorkflowContext<ChaosStepsInput>) {
    for (let n = 1; n <= ctx.input.steps; n++) {
      await ctx.step.run(`s${n}`, async ({ signal }) => {
        await this.effects.recordEffect(ctx.runId, `s${n}`);
        await sleep(ctx.input.stepMs, signal);
        return { n };
      });
    }
    return { steps: ctx.input.steps };
  }
}

/** 'chaos-suicide': its one step records an effect, then SIGKILLs its own worker. Every time. */
function suicideWorkflow(effects: ChaosEffects): FunctionalWorkflowDefinition {
  return workflow('chaos-suicide', async (ctx) => {
    await ctx.step.run('suicide', async () => {
      await effects.recordEffect(ctx.runId, 'suicide');
      process.kill(process.pid, 'SIGKILL');
      await new Promise(() => undefined);
    });
  });
}

export interface ChaosSagaInput {
  /** Steps s1..sN, at most SAGA_MAX_STEPS. */
  steps: number;
  /** The step that throws (after recording its effect). */
  failAt: number;
}

export const SAGA_MAX_STEPS = 9;

/** Set in a worker's env: that worker dies right after the first compensation it finished. */
export const KILL_AFTER_FIRST_COMPENSATION_ENV = 'CHAOS_KILL_AFTER_FIRST_COMPENSATION';

/**
 * 'chaos-saga': steps s1..sN, each records an effect and returns `{ step, token }` (a fresh
 * token, so a test can tell the saved output from a re-run); step `failAt` throws. Every step
 * has a compensation that records the output it received in `chaos_compensations`.
 *
 * With CHAOS_KILL_AFTER_FIRST_COMPENSATION=1 the worker SIGKILLs itself as the second
 * compensation it is asked to run starts, before that one does anything: the saga runs
 * compensations one at a time and checkpoints each (`compensated_at`) before the next, so the
 * rollback is cut after exactly one finished compensation. (Dying inside the first one, after
 * its row but before its checkpoint, would rightly make the next worker run it again.)
 */
function sagaWorkflow(effects: ChaosEffects): FunctionalWorkflowDefinition {
  const killAfterFirstCompensation = process.env[KILL_AFTER_FIRST_COMPENSATION_ENV] === '1';
  let compensationsStarted = 0;
  const compensate = (stepKey: string) => async (output: unknown, ctx: CompensationContext) => {
    compensationsStarted++;
    if (killAfterFirstCompensation && compensationsStarted > 1) {
      process.kill(process.pid, 'SIGKILL');
      await new Promise(() => undefined);
    }
    await effects.recordCompensation(ctx.runId, stepKey, output);
  };
  const keys = Array.from({ length: SAGA_MAX_STEPS }, (_, index) => `s${index + 1}`);

  return workflow(
    'chaos-saga',
    async (ctx: WorkflowContext<ChaosSagaInput>) => {
      const outputs: unknown[] = [];
      for (const key of keys.slice(0, ctx.input.steps)) {
        outputs.push(
          await ctx.step.run(key, async () => {
            await effects.recordEffect(ctx.runId, key);
            if (key === `s${ctx.input.failAt}`) throw new Error(`chaos-saga: step ${key} fails by design`);
            return { step: key, token: randomUUID() };
          }),
        );
      }
      return { outputs };
    },
    { compensations: Object.fromEntries(keys.map((key) => [key, compensate(key)])) },
  );
}

export function chaosScenario(names: ChaosScenarioName[], effects: ChaosEffects): ChaosScenario {
  const scenario: ChaosScenario = { workflows: [], providers: [] };
  for (const name of new Set(names)) {
    switch (name) {
      case 'chaos-steps':
        scenario.providers.push(ChaosStepsWorkflow);
        break;
      case 'chaos-suicide':
        scenario.workflows.push(suicideWorkflow(effects));
        break;
      case 'chaos-saga':
        scenario.workflows.push(sagaWorkflow(effects));
        break;
      default:
        throw new Error(`Unknown chaos scenario "${String(name)}"`);
    }
  }
  return scenario;
}
