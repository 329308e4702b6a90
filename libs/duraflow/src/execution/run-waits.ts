import { ChildKeyTakenError, RunAbortedError, SignalTimeoutError } from '../domain/errors';
import { ChildWorkflowOptions } from '../domain/workflow-context';
import { DuraflowClock } from '../domain/engine-clock';
import { TaskLease } from '../lease/task-lease';
import { WakeUpTimer } from '../notifications/wake-up-timer';
import { NO_WAKE_UP, WaitSettlement, WaitToSettle } from '../persistence/lifecycle/settle-wait';
import { TaskTransitions } from '../persistence/lifecycle/task-transitions';
import { StepMemo } from '../persistence/step.store';
import { describeError } from '../util/describe-error';
import { RunKernel } from './run-kernel';
import { TaskFactory } from './task-factory';
import { childFailure, childIdOf } from './workflow-context';

/** What the waits of one live run work with. */
export interface RunWaitsContext {
  lease: TaskLease;
  kernel: RunKernel;
  transitions: TaskTransitions;
  factory: TaskFactory;
  wakeUps: WakeUpTimer;
  /** The trace the task was submitted in (JSON), which its children continue; null without one. */
  traceContextJson: string | null;
  /** The engine's clock: is a recorded sleep over. */
  clock: DuraflowClock;
}

/**
 * The durable primitives of one live run, once the kernel let them through and they did not
 * finish in an earlier run: a wait settles in the database under the run's claim
 * (lifecycle/settle-wait.ts), and when it still is not over the task is suspended there and the
 * run unwinds with RunSuspended; the next claim replays the run from the top. A child is
 * started with the parent's step in one transaction (lifecycle/start-child.ts).
 */
export class RunWaits {
  /** Set when a wait could not be recorded (database unreachable): the run must not decide anything. */
  persistenceFailure: unknown;

  constructor(private readonly run: RunWaitsContext) {}

  async sleep(key: string, wakeAt: Date, recorded: StepMemo | undefined, input: Record<string, unknown>): Promise<void> {
    const { lease, kernel, transitions } = this.run;
    // The common wake-up: the sleep is over, one fenced statement records it (the general settle is a transaction of several).
    if (recorded && wakeAt.getTime() <= this.run.clock.now()) {
      const seq = await this.persist(() => transitions.completeDueSleep(lease.taskId, lease.claimToken, key, kernel.takeCompletionSeq()));
      if (seq !== null) return kernel.completedAt(seq);
    }
    await this.settle({ stepKey: key, kind: 'sleep', wakeAt, inputJson: JSON.stringify(input) });
  }

  async waitForSignal(key: string, name: string, deadline: Date | null, timeoutMs: number | undefined): Promise<unknown> {
    const settled = await this.settle({
      stepKey: key,
      kind: 'signal',
      wakeAt: deadline,
      signalName: name,
      inputJson: JSON.stringify({ name, timeoutMs: timeoutMs ?? null }),
    });
    if (settled.outcome === 'failed') throw new SignalTimeoutError(this.run.lease.taskId, name, timeoutMs ?? null);
    return settled.outputUndefined ? undefined : settled.output;
  }

  startChild(key: string, workflowName: string, input: unknown, options: ChildWorkflowOptions | undefined): Promise<string> {
    return this.start(key, workflowName, input, options, false);
  }

  async runChild(
    key: string,
    workflowName: string,
    input: unknown,
    options: ChildWorkflowOptions | undefined,
    recorded: StepMemo | undefined,
  ): Promise<unknown> {
    if (!recorded) {
      // Just started: the child cannot have ended, so the parent was suspended in the same transaction.
      await this.start(key, workflowName, input, options, true);
      throw this.run.kernel.suspend(NO_WAKE_UP);
    }
    const childTaskId = childIdOf(recorded);
    const settled = await this.settle({
      stepKey: key,
      kind: 'child',
      wakeAt: null,
      childTaskId,
      inputJson: JSON.stringify({ workflowName, childTaskId }),
    });
    if (settled.outcome === 'failed') throw childFailure(settled.error, childTaskId, workflowName);
    return settled.outputUndefined ? undefined : settled.output;
  }

  private async start(key: string, workflowName: string, input: unknown, options: ChildWorkflowOptions | undefined, wait: boolean) {
    const { lease, kernel, transitions, factory, traceContextJson } = this.run;
    const child = await factory.prepare(workflowName, input, options ?? {}, {
      kind: 'child',
      parentTaskId: lease.taskId,
      parentStepKey: key,
      traceContextJson,
    });
    const start = { child: { ...child, parentTaskId: lease.taskId, parentStepKey: key }, claimToken: lease.claimToken, wait };
    const started = await this.persist(() => transitions.startChild({ ...start, completionSeq: kernel.takeCompletionSeq() }));
    if (!started) throw this.lost();
    return started.childTaskId;
  }

  /** Settles the wait in the database; suspends the run when it is not over. */
  private async settle(
    wait: Omit<WaitToSettle, 'taskId' | 'claimToken' | 'completionSeq'>,
  ): Promise<Exclude<WaitSettlement, { outcome: 'waiting' | 'lost' }>> {
    const { lease, kernel, transitions } = this.run;
    const settled = await this.persist(() =>
      transitions.settleWait({ ...wait, taskId: lease.taskId, claimToken: lease.claimToken, completionSeq: kernel.takeCompletionSeq() }),
    );
    if (settled.outcome === 'lost') throw this.lost();
    if (settled.outcome === 'waiting') {
      if (settled.wakeAt.getTime() < NO_WAKE_UP.getTime()) this.armWakeUp(settled.wakeAt, Date.now(), settled.wakeInMs);
      throw kernel.suspend(settled.wakeAt);
    }
    kernel.completedAt(settled.completionSeq);
    return settled;
  }

  /**
   * Arms this process's timer for the wake-up. `receivedAt + wakeInMs` is sure never to be early
   * whatever this host's clock says (the server read its own clock `wakeInMs` before the wake-up,
   * before this reply), but it is late by the time the settle waited for a connection and its
   * reply for the event loop. So the wake-up's own time (`wake_at`, the server's clock) is armed
   * too when it is earlier: with the clocks in step (one host, or NTP) it claims the task on
   * time; a server clock behind this one makes it fire early, find nothing due, and the first
   * claims it.
   */
  private armWakeUp(wakeAt: Date, receivedAt: number, wakeInMs: number): void {
    // + 1: a Date holds whole milliseconds (wake_at's microseconds and the reply's arrival are cut).
    const certain = Math.ceil(receivedAt + wakeInMs) + 1;
    const own = wakeAt.getTime() + 1;
    this.run.wakeUps.wakeAt(new Date(certain));
    if (own < certain - 1) this.run.wakeUps.wakeAt(new Date(own));
  }

  /** A statement of the run through its lease; an unreachable database aborts the run as a checkpoint's failure does. */
  private async persist<T>(statement: () => Promise<T>): Promise<T> {
    const { lease } = this.run;
    try {
      return await lease.retry(statement);
    } catch (error) {
      const reason = lease.stoppedBecause;
      if (reason) throw new RunAbortedError(lease.taskId, reason);
      // A typed refusal of the move (nothing written): the run's own failure, thrown at its call.
      if (error instanceof ChildKeyTakenError) throw error;
      this.persistenceFailure = error;
      throw new RunAbortedError(lease.taskId, `a wait could not be recorded (${describeError(error).message})`);
    }
  }

  /** The claim owns the task no more (cancelled, reaped): the run goes no further. */
  private lost(): RunAbortedError {
    const { lease } = this.run;
    lease.stop('lease-lost');
    return new RunAbortedError(lease.taskId, lease.stoppedBecause ?? 'lease-lost');
  }
}
