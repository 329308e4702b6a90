import { Injectable } from '@nestjs/common';
import type * as Otel from '@opentelemetry/api';
import type { RunOutcome } from '../domain/run-outcome';
import type { TaskLease } from '../lease/task-lease';
import type { ClaimedTask } from '../persistence/lifecycle/claim-tasks';
import { DuraflowMetrics } from './metrics';
import { DuraflowTracing } from './tracing';

/** What one observed run carries to its steps and compensations, found through the lease they write through. */
interface ObservedRun {
  taskId: string;
  workflow: string;
  metrics: DuraflowMetrics | undefined;
  tracing: DuraflowTracing | undefined;
  /** The run span's context: the parent of its step and compensation spans. */
  context: Otel.Context | undefined;
  /** The error the run failed with, recorded on its span. */
  error: unknown;
}

/** How an undo ended, as the observer records it: `undefined` when it was stopped (its lease was lost). */
interface CompensationResult {
  ok: boolean;
  attempts: number;
  error?: unknown;
}

/** The runs being observed in this process, by their lease: the hooks in the executors take only the lease. */
const observedRuns = new WeakMap<TaskLease, ObservedRun>();

/**
 * Spans and metrics of the runs this process executes. The worker wraps each run in `observe`;
 * a step's attempts call `observeStepAttempt` with the run's lease, and every undo of a step goes
 * through `observeUndo`. With no tracer and no metrics configured nothing is registered, and the
 * hooks cost one WeakMap lookup before they call the code they wrap.
 */
@Injectable()
export class RunObserver {
  /** Decided once, when the module starts. Private, so the package's declarations never name @opentelemetry/api. */
  private readonly tracing = DuraflowTracing.detect();

  constructor(readonly metrics: DuraflowMetrics) {}

  /** False when neither tracing nor metrics are on: nothing to observe. */
  get active(): boolean {
    return this.tracing !== undefined || this.metrics.enabled;
  }

  /** The submitter's trace context in JSON for the new task's row (null when no span is active or tracing is off). */
  captureTraceContext(): string | null {
    return this.tracing ? this.tracing.captureContext() : null;
  }

  /**
   * A run span (`duraflow.run <workflow>`, child of the trace its task was submitted in, or with
   * `underActiveSpan` of the caller's active span: a cancel's rollback) and its metrics, around one run.
   */
  async observe(claimed: ClaimedTask, lease: TaskLease, run: () => Promise<RunOutcome>, underActiveSpan = false): Promise<RunOutcome> {
    if (!this.active) return run();
    const { task } = claimed;
    const tracing = this.tracing;
    const started = performance.now();
    const traced = tracing?.start(
      `duraflow.run ${task.workflowName}`,
      underActiveSpan ? tracing.active() : tracing.runParent(claimed.traceContext),
      {
        'duraflow.task_id': task.id,
        'duraflow.workflow': task.workflowName,
        'duraflow.attempt': (task.retryCount ?? 0) + 1,
      },
    );
    const observed: ObservedRun = {
      taskId: task.id,
      workflow: task.workflowName,
      metrics: this.metrics.enabled ? this.metrics : undefined,
      tracing,
      context: traced?.context,
      // A rollback resumed by this claim failed with the error the task keeps.
      error: task.rollbackReason === 'failed' ? (task.error ?? undefined) : undefined,
    };
    observedRuns.set(lease, observed);
    let outcome: RunOutcome = 'unrecorded';
    try {
      // Not run inside the span's context: the worker's own work that a run sets off (the next
      // claim, heartbeats) must not become its children. Steps and compensations name their parent.
      outcome = await run();
      return outcome;
    } catch (error) {
      observed.error ??= error; // a bug: the worker logs it and counts the run unrecorded
      throw error;
    } finally {
      observedRuns.delete(lease);
      this.metrics.runEnded(task.workflowName, outcome, (performance.now() - started) / 1000);
      if (traced && tracing) tracing.end(traced.span, outcome, FAILED_OUTCOMES.has(outcome) ? (observed.error ?? outcome) : undefined);
    }
  }

  /**
   * One undo of a step (a compensation with its retries, or a dead letter's retry): a
   * `duraflow.compensate <key>` span and the compensations counter. Under the span of the run
   * whose lease undoes it (a rollback, a parent's rollback of its finished child), or under the
   * caller's active span (a dead letter's retry, which has no lease). A failure counts a dead
   * letter, but for a retry (its entry stays: no new dead letter).
   */
  observeUndo<R extends CompensationResult>(undo: ObservedUndo, body: () => Promise<R | undefined>): Promise<R | undefined> {
    const run = undo.lease ? observedRuns.get(undo.lease) : undefined;
    if (!run && (undo.lease || !this.active)) return body();
    const observed = {
      taskId: undo.taskId,
      workflow: undo.workflow,
      tracing: run ? run.tracing : this.tracing,
      metrics: run ? run.metrics : this.metrics.enabled ? this.metrics : undefined,
      context: run ? run.context : this.tracing?.active(),
    };
    return compensationObserved(observed, undo.stepKey, body, { deadLetterOnFailure: !undo.deadLetterId, deadLetterId: undo.deadLetterId });
  }
}

/** What an observed undo is: the step and its task, and the lease of the rollback that runs it or the dead letter it retries. */
export interface ObservedUndo {
  lease?: TaskLease;
  deadLetterId?: string;
  taskId: string;
  workflow: string;
  stepKey: string;
}

const FAILED_OUTCOMES = new Set<RunOutcome>(['failed', 'rolled_back', 'partial_rollback', 'unrecorded']);

/** The error a run failed with (the task's error), for its span. Called where the run decides it failed. */
export function noteRunFailure(lease: TaskLease, error: unknown): void {
  const observed = observedRuns.get(lease);
  if (observed) observed.error = error;
}

/** One attempt of a step: a `duraflow.step <key>` span under the run's, and the step duration histogram. */
export function observeStepAttempt<T>(lease: TaskLease, stepKey: string, attempt: number, body: () => Promise<T>): Promise<T> {
  const observed = observedRuns.get(lease);
  if (!observed) return body();
  const { tracing, metrics, context } = observed;
  const started = performance.now();
  const traced =
    tracing && context
      ? tracing.start(`duraflow.step ${stepKey}`, context, {
          'duraflow.task_id': observed.taskId,
          'duraflow.workflow': observed.workflow,
          'duraflow.step_key': stepKey,
          'duraflow.attempt': attempt,
        })
      : undefined;
  const ended = (outcome: 'completed' | 'failed' | 'stopped', error?: unknown) => {
    metrics?.stepAttempt(observed.workflow, stepKey, outcome, (performance.now() - started) / 1000);
    if (traced) tracing!.end(traced.span, outcome, error);
  };
  const pending = traced ? tracing!.within(traced.context, body) : body();
  return pending.then(
    (value) => {
      ended('completed');
      return value;
    },
    (error: unknown) => {
      ended(lease.stoppedBecause ? 'stopped' : 'failed', error);
      throw error;
    },
  );
}

function compensationObserved<R extends CompensationResult>(
  observed: Pick<ObservedRun, 'taskId' | 'workflow' | 'tracing' | 'metrics' | 'context'>,
  stepKey: string,
  body: () => Promise<R | undefined>,
  { deadLetterOnFailure, deadLetterId }: { deadLetterOnFailure: boolean; deadLetterId?: string },
): Promise<R | undefined> {
  const { tracing, metrics, context } = observed;
  const traced =
    tracing && context
      ? tracing.start(`duraflow.compensate ${stepKey}`, context, {
          'duraflow.task_id': observed.taskId,
          'duraflow.workflow': observed.workflow,
          'duraflow.step_key': stepKey,
          ...(deadLetterId ? { 'duraflow.dead_letter_id': deadLetterId } : {}),
        })
      : undefined;
  const pending = traced ? tracing!.within(traced.context, body) : body();
  return pending.then((result) => {
    const outcome = !result ? 'stopped' : result.ok ? 'compensated' : 'failed';
    metrics?.compensation(observed.workflow, stepKey, outcome, deadLetterOnFailure);
    if (traced) {
      if (result) traced.span.setAttribute('duraflow.attempt', result.attempts);
      tracing!.end(traced.span, outcome, result && !result.ok ? result.error : undefined);
    }
    return result;
  });
}
