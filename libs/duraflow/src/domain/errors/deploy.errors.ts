import { DuraflowError } from './duraflow.error';

/** `submit(name, input, { version })` names a version of the workflow this process does not register. */
export class UnknownWorkflowVersionError extends DuraflowError {
  readonly code = 'UNKNOWN_WORKFLOW_VERSION';
  constructor(
    readonly workflowName: string,
    readonly version: unknown,
    readonly registeredVersions: number[],
  ) {
    super(
      `Workflow "${workflowName}" has no version ${JSON.stringify(version) ?? String(version)} in this application. ` +
        `Registered versions: ${registeredVersions.join(', ')}. Pass one of them as { version }, or leave it out to start the newest.`,
    );
  }
}

/**
 * The determinism guard stopped a recovered run: its code asked for a step that was never
 * recorded while a recorded step remained that it had not asked for (or it returned without
 * asking for one), so today's code takes another path than the one the run recorded. The task is
 * held (pending, never claimed, nothing rolled back) with this error; deploy code that takes the
 * recorded path (`ctx.patched(id)` for a change in place, a new workflow version for a new path)
 * and call `workflows.resume(id)`, or cancel it.
 */
export class NonDeterminismError extends DuraflowError {
  readonly code = 'NON_DETERMINISM';
  constructor(
    readonly taskId: string,
    readonly workflowName: string,
    /** The recorded step the code had not asked for when it diverged. */
    readonly recordedStep: string,
    /** The step the code asked for instead; null when the run returned without asking for the recorded one. */
    readonly requestedStep: string | null,
  ) {
    super(
      `Task ${taskId} (${workflowName}) took another path than the one it recorded: ` +
        (requestedStep === null
          ? `it returned without asking for the recorded step "${recordedStep}". `
          : requestedStep === `${recordedStep} (deprecated)`
            ? `the code retired the patch (ctx.deprecatePatch) whose answer it recorded as false in "${recordedStep}": it needs the old branch. `
            : `it asked for step "${requestedStep}", which it never recorded, while the recorded step "${recordedStep}" was not asked for yet. `) +
        `The task is held: nothing else runs and nothing is rolled back. Deploy code that takes the recorded path ` +
        `(guard the change with ctx.patched(id), or start new runs on a new workflow version), then call workflows.resume("${taskId}"), ` +
        `or cancel the task.`,
    );
  }

  /** What `agent_tasks.error` keeps for a held task. */
  toJSON(): Record<string, unknown> {
    return {
      name: this.name,
      message: this.message,
      code: this.code,
      recordedStep: this.recordedStep,
      requestedStep: this.requestedStep,
    };
  }
}

/** `workflows.resume(id)` on a task the determinism guard does not hold. */
export class TaskNotHeldError extends DuraflowError {
  readonly code = 'TASK_NOT_HELD';
  constructor(
    readonly taskId: string,
    readonly status: string,
  ) {
    super(`Task ${taskId} is not held by the determinism guard (status ${status}): there is nothing to resume.`);
  }
}

/** A replay check was given something it cannot replay (no workflows, a file that is not an export of runs). */
export class ReplayCheckInputError extends DuraflowError {
  readonly code = 'INVALID_REPLAY_INPUT';
  constructor(reason: string) {
    super(`Cannot run the replay check: ${reason}`);
  }
}
