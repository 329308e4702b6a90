import { DynamicModule, ForwardReference, LoggerService, LogLevel, Provider, Type } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DuraflowModuleOptions } from '../config/duraflow.options';
import { DURAFLOW_CLOCK } from '../domain/engine-clock';
import { DURAFLOW_ENTITIES } from '../domain/entities';
import { StepRun } from '../domain/entities/step-run.entity';
import { DuraflowModule } from '../duraflow.module';
import { DURAFLOW_STEP_FAULTS, StepBody, StepPoint } from '../execution/step-faults';
import { WakeUpTimer } from '../notifications/wake-up-timer';
import { TaskTransitions } from '../persistence/lifecycle/task-transitions';
import { ScheduleTicker } from '../schedules/schedule-ticker';
import { EventGroupCloser } from '../events/event-group-closer';
import { EventRetention } from '../events/event-retention';
import { ReaperService } from '../services/reaper.service';
import { SignalReceipt } from '../services/workflows/task-control';
import { CallbackReceipt } from '../services/workflows/task-callbacks';
import { WorkflowService } from '../services/workflow.service';
import { Duration, durationMs } from './duration';
import { FailStepOptions, FaultPlan } from './fault-plan';
import { createEnvDatabase, EnvDatabase } from './test-database';
import { EnvQueue, EnvQueueState } from './env-queue';
import { VirtualClock } from './virtual-clock';

/** A provider replaced for the test, as `Test.createTestingModule(...).overrideProvider(provide)` takes it. */
export interface ProviderOverride {
  provide: unknown;
  useValue?: unknown;
  useClass?: Type;
  useFactory?: (...args: any[]) => unknown;
  inject?: any[];
}

export interface DuraflowTestEnvOptions {
  /** The modules the workflows need (their own module, TypeORM features...). */
  imports?: Array<Type | DynamicModule | Promise<DynamicModule> | ForwardReference>;
  /** The workflows and the providers they inject. */
  providers?: Provider[];
  /** DuraflowModule.forRoot's options, over the kit's (short poll and heartbeat intervals). */
  options?: DuraflowModuleOptions;
  /** Providers replaced for the test (an external API's client). */
  overrides?: ProviderOverride[];
  /** The application's own TypeORM entities, on the environment's connection besides Duraflow's. */
  entities?: Function[];
  /** When only timers are left, `runUntilIdle` moves the clock to the next one (a sleep's end, a timeout, a backoff; not a schedule's tick). Default false. */
  skipTime?: boolean;
  /** How long (real time) `runUntilIdle` waits while nothing changes (as many tasks running, as many due) before it throws, saying which are busy. Default 15 s. */
  idleTimeoutMs?: number;
  /** What Nest logs. Default: errors and warnings. */
  logger?: LogLevel[] | LoggerService | false;
}

const KIT_OPTIONS: DuraflowModuleOptions = {
  worker: { pollIntervalMs: 50, maxIdlePollIntervalMs: 500, shutdownTimeoutMs: 2_000 },
  heartbeatIntervalMs: 200,
};

/** A timer this close (a 100 ms backoff, a short sleep) is waited for in real time: the run is not idle yet. */
const SHORT_TIMER_MS = 1_000;

/** Time skips `skipTime` makes in one `runUntilIdle` at most (a workflow that sleeps in a loop for ever). */
const MAX_SKIPS = 10_000;

/**
 * Workflows under test (`createDuraflowTestEnv`): a Nest testing module with DuraflowModule and
 * the test's workflows, on a PostgreSQL database of its own (migrated, dropped on `close()`),
 * the engine's clock virtual (VirtualClock, and `duraflow_now()` in the database), and faults
 * injected at the run's one seam (execution/step-faults.ts).
 */
export class DuraflowTestEnv {
  readonly workflows: WorkflowService;
  private readonly queue: EnvQueue;
  private readonly recoveries = new Set<Promise<unknown>>();
  private closed = false;

  constructor(
    readonly moduleRef: TestingModule,
    private readonly database: EnvDatabase,
    readonly clock: VirtualClock,
    private readonly faults: FaultPlan,
    private readonly settings: { skipTime: boolean; idleTimeoutMs: number },
  ) {
    this.workflows = moduleRef.get(WorkflowService, { strict: false });
    this.queue = new EnvQueue(database.client);
  }

  /** The environment's database (its URL), e.g. for a client of the test's own. */
  get databaseUrl(): string {
    return this.database.url;
  }

  /** A provider of the testing module (a workflow, a service it injects). */
  get<T>(token: Type<T> | string | symbol): T {
    return this.moduleRef.get<T>(token, { strict: false });
  }

  /** The engine's clock now. */
  now(): Date {
    return new Date(this.clock.now());
  }

  signal(taskId: string, name: string, payload?: unknown): Promise<SignalReceipt> {
    return this.workflows.signal(taskId, name, payload);
  }

  /** Completes a callback a run opened (`ctx.createCallback`), as a POST to its url would; needs `options.callbacks`. */
  completeCallback(callbackId: string, payload?: unknown): Promise<CallbackReceipt> {
    return this.workflows.completeCallback(callbackId, payload);
  }

  getSteps(taskId: string): Promise<StepRun[]> {
    return this.workflows.getSteps(taskId);
  }

  /**
   * Runs until every task is finished or waiting (for a time, a signal, a child), the crashes
   * recovered; a wait for a time less than a second away (a short backoff) is waited out in real time. With `skipTime`, a wait for a time is then skipped to, and so on until nothing
   * but signals, children and schedules is left.
   */
  async runUntilIdle(): Promise<void> {
    for (let skips = 0; ; skips++) {
      const settled = await this.settle();
      if (!this.settings.skipTime || skips >= MAX_SKIPS) return;
      const next = this.nextTimer(settled, false);
      if (next === undefined) return;
      await this.moveClockTo(next);
    }
  }

  /**
   * Moves the engine's clock `duration` ahead, firing what real time would have fired, in order:
   * it moves to each next due time (a sleep's end, a timeout, a retry's backoff, a schedule's
   * tick) and runs until idle there, then to the end; then a retention pass (finished tasks,
   * published events and started debounces and batches past their retention by then).
   */
  async advanceTime(duration: Duration): Promise<void> {
    const target = this.clock.now() + durationMs(duration);
    let settled = await this.settle();
    for (;;) {
      const next = this.nextTimer(settled, true);
      if (next === undefined || next > target) break;
      await this.moveClockTo(next);
      settled = await this.settle();
    }
    await this.moveClockTo(target);
    await this.settle();
    await this.get(ReaperService).removeExpiredTasks();
    await this.get(EventRetention).deleteExpired();
  }

  /** The next run of `workflow` dies right after step `step`'s checkpoint landed, as a killed process would; recovery then runs. */
  crashAfterStep(workflow: string, step: string): void {
    this.faults.crash(workflow, step, 'after');
  }

  /** The next run of `workflow` that reaches step `step` dies before its body starts; recovery then runs. */
  crashBeforeStep(workflow: string, step: string): void {
    this.faults.crash(workflow, step, 'before');
  }

  /** Attempts of step `step` of `workflow` throw `error` (the first `times`, default every one), as the step's body would. */
  failStep(workflow: string, step: string, error: unknown, options?: FailStepOptions): void {
    this.faults.fail(workflow, step, error, options);
  }

  /** Step `step` of `workflow` runs `fn` instead of its body (an external API stubbed), the class untouched. */
  stubStep<T>(workflow: string, step: string, fn: StepBody<T>): void {
    this.faults.stub(workflow, step, fn as StepBody<unknown>);
  }

  /** Closes the module (its worker stopped) and drops the environment's database. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.faults.clear();
    try {
      await Promise.allSettled([...this.recoveries]);
      await this.moduleRef.close();
    } finally {
      await this.database.drop();
    }
  }

  /** A crashed run: its claim recovered as the reaper recovers a stale one, at once (the run writes nothing more). */
  recoverCrash(at: StepPoint): void {
    const recovery = this.get(TaskTransitions)
      .recoverCrashedClaim(at.taskId, at.claimToken)
      .finally(() => this.recoveries.delete(recovery));
    this.recoveries.add(recovery);
  }

  /** Until nothing runs or is due (crash recoveries done); throws after idleTimeoutMs without progress, saying what is busy. */
  private async settle(): Promise<EnvQueueState> {
    let deadline = Date.now() + this.settings.idleTimeoutMs;
    let seen = '';
    for (;;) {
      this.wakeWorker();
      await Promise.allSettled([...this.recoveries]);
      let state = await this.queue.state();
      // A debounce or batch due by the engine's clock starts now, as its closer's next pass would.
      if (state.dueGroups > 0 && (await this.get(EventGroupCloser).closeDue()) > 0) state = await this.queue.state();
      const soon = this.clock.now() + SHORT_TIMER_MS;
      const busy =
        state.runnable - state.rateHeld > 0 ||
        state.running > this.clock.sleeping ||
        this.recoveries.size > 0 ||
        (this.clock.nextSleepEnd() ?? Infinity) <= soon ||
        (state.nextWakeUp ?? Infinity) <= soon;
      // Every move of a task is one transaction: a state with nothing running or due is idle.
      if (!busy) return state;
      const progress = `${state.running}/${state.runnable}`;
      if (progress !== seen) {
        seen = progress;
        deadline = Date.now() + this.settings.idleTimeoutMs;
      } else if (Date.now() > deadline) {
        throw new Error(
          `runUntilIdle: for ${this.settings.idleTimeoutMs} ms, ${state.running} task(s) still ran and ${state.runnable} were due ` +
            `(${state.busyWorkflows.join(', ')}). Is each workflow among the environment's providers, and does none loop for ever?`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  /** The next time something waits for: a task's wake-up, a debounce's or batch's due time, a place in a full rate-limit window, a backoff's end, or (`withTicks`) a schedule's tick. */
  private nextTimer(state: EnvQueueState, withTicks: boolean): number | undefined {
    const times = [state.nextWakeUp, state.nextGroupDue, state.rateHeld > 0 ? state.nextRateOpening : undefined, this.clock.nextSleepEnd()];
    if (withTicks) times.push(this.get(ScheduleTicker).nextTick()?.getTime());
    const defined = times.filter((time): time is number => time !== undefined);
    return defined.length ? Math.min(...defined) : undefined;
  }

  /** The clock, in the database and here, at `time` (never back); what fell due is woken. */
  private async moveClockTo(time: number): Promise<void> {
    // + 1 ms: a wake-up stored with microseconds is due once the clock is past its millisecond.
    const offset = this.clock.offsetFor(time + 1);
    await this.queue.setClockOffset(offset);
    this.clock.moveTo(offset);
    await this.get(ScheduleTicker).wakeAll();
    this.wakeWorker();
  }

  private wakeWorker(): void {
    this.get(WakeUpTimer).wakeAt(new Date(0));
  }
}

/**
 * Workflows under test: `providers` (the workflow classes and what they inject) and `imports`
 * in a Nest testing module with DuraflowModule, on a fresh PostgreSQL database (DATABASE_URL's
 * server, or the one the kit's Jest global setup found or started), with the engine's clock
 * virtual. Close it (`env.close()`) in `afterEach`/`afterAll`: that drops the database.
 */
export async function createDuraflowTestEnv(options: DuraflowTestEnvOptions = {}): Promise<DuraflowTestEnv> {
  const database = await createEnvDatabase();
  try {
    const clock = new VirtualClock();
    let env: DuraflowTestEnv | undefined;
    const faults = new FaultPlan((at) => env?.recoverCrash(at));
    const duraflow = { ...KIT_OPTIONS, ...options.options, worker: { ...KIT_OPTIONS.worker, ...options.options?.worker } };
    let builder = Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: database.url, entities: [...DURAFLOW_ENTITIES, ...(options.entities ?? [])] }),
        DuraflowModule.forRoot(duraflow),
        ...(options.imports ?? []),
      ],
      providers: options.providers ?? [],
    })
      .overrideProvider(DURAFLOW_CLOCK)
      .useValue(clock)
      .overrideProvider(DURAFLOW_STEP_FAULTS)
      .useValue(faults);
    for (const override of options.overrides ?? []) builder = applyOverride(builder, override);
    const moduleRef = await builder.compile();
    moduleRef.useLogger(options.logger ?? ['error', 'warn']);
    await moduleRef.init();
    env = new DuraflowTestEnv(moduleRef, database, clock, faults, {
      skipTime: options.skipTime ?? false,
      idleTimeoutMs: options.idleTimeoutMs ?? 15_000,
    });
    return env;
  } catch (error) {
    await database.drop().catch(() => undefined);
    throw error;
  }
}

type Builder = ReturnType<typeof Test.createTestingModule>;

function applyOverride(builder: Builder, override: ProviderOverride): Builder {
  const by = builder.overrideProvider(override.provide);
  if (override.useFactory) return by.useFactory({ factory: override.useFactory, inject: override.inject });
  if (override.useClass) return by.useClass(override.useClass);
  return by.useValue(override.useValue);
}
