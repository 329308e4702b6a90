import { Injectable, Type } from '@nestjs/common';
import { ResolvedStepOptions } from '../config/resolved-options';
import { DuplicateWorkflowError, UnknownWorkflowError, UnknownWorkflowVersionError } from '../domain/errors';
import { CompensationFn } from '../domain/workflow-definition';
import { WorkflowContext } from '../domain/workflow-context';
import { UnknownInputProperties } from '../domain/workflow-definition';
import { FlowLimits } from '../validation/flow-limits';

export interface RegisteredCompensation {
  /** What `step_runs.compensation_fn` stores; resolves back through `resolveCompensation`. */
  name: string;
  fn: CompensationFn;
  /** Timeout, retries and backoff (compensate site over workflow over module). */
  options: ResolvedStepOptions;
}

/** A workflow as the engine runs it, whichever way it was defined. */
export interface RegisteredWorkflow {
  name: string;
  /**
   * Its version: `version` of its definition, 1 when it declares none. Tasks keep the version
   * they started on (`agent_tasks.workflow_version`, NULL for an undeclared one, read as 1).
   */
  version: number;
  /** The version as declared, what a submit stores: undefined for a workflow that declares none. */
  declaredVersion?: number;
  /** Where it was defined, for error messages: `class BookingWorkflow` or `workflow("payment")`. */
  source: string;
  run: (ctx: WorkflowContext) => Promise<unknown>;
  inputType?: Type<object>;
  /** What submit does with input properties `inputType` does not declare. */
  unknownInputProperties: UnknownInputProperties;
  maxRetries?: number;
  step: ResolvedStepOptions;
  /** By step key. */
  compensations: Map<string, RegisteredCompensation>;
  /** Its concurrency and rate limits; null when it has none (claimed by the plain claim). */
  flow?: FlowLimits | null;
}

/** The (name, versions) pairs a worker claims: only tasks of a version it registers. */
export interface ClaimableWorkflow {
  name: string;
  versions: number[];
}

/**
 * Every workflow this process knows, filled at boot by the explorer, keyed by name and version:
 * a process may register several versions of one workflow side by side (a class per version),
 * so runs started on an old version finish on its code while new runs start on the newest.
 */
@Injectable()
export class WorkflowRegistry {
  /** name -> version -> workflow, versions in ascending order. */
  private readonly workflows = new Map<string, Map<number, RegisteredWorkflow>>();

  register(workflow: RegisteredWorkflow): void {
    const versions = this.workflows.get(workflow.name) ?? new Map<number, RegisteredWorkflow>();
    const existing = versions.get(workflow.version);
    if (existing) throw new DuplicateWorkflowError(workflow.name, existing.source, workflow.source, workflow.version);
    versions.set(workflow.version, workflow);
    this.workflows.set(workflow.name, new Map([...versions].sort(([a], [b]) => a - b)));
  }

  /**
   * The workflow `name` at `version` (a task's `workflow_version`: null is version 1), or its
   * newest registered version when `version` is undefined.
   * @throws UnknownWorkflowError, UnknownWorkflowVersionError
   */
  get(name: string, version?: number | null): RegisteredWorkflow {
    const versions = this.workflows.get(name);
    if (!versions) throw new UnknownWorkflowError(name, this.names());
    if (version === undefined) return [...versions.values()].at(-1)!;
    const workflow = versions.get(version ?? 1);
    if (!workflow) throw new UnknownWorkflowVersionError(name, version, [...versions.keys()]);
    return workflow;
  }

  names(): string[] {
    return [...this.workflows.keys()];
  }

  /** The versions of `name` this process registers, ascending (empty when none). */
  versions(name: string): number[] {
    return [...(this.workflows.get(name)?.keys() ?? [])];
  }

  /** What the worker claims: every registered name with its versions. */
  claimable(): ClaimableWorkflow[] {
    return [...this.workflows].map(([name, versions]) => ({ name, versions: [...versions.keys()] }));
  }

  /** `name@2` for each registered version (just `name` for a workflow registered once, at version 1), for logs. */
  describe(): string[] {
    return this.claimable().flatMap(({ name, versions }) =>
      versions.length === 1 && versions[0] === 1 ? [name] : versions.map((version) => `${name}@${version}`),
    );
  }

  /**
   * The compensation a step's `step_runs.compensation_fn` names, in this process: only one the
   * task's own workflow registers for that very step (at the task's version when given, else at
   * any version, newest first), and only under the name stored. A name that points anywhere else
   * (another workflow's undo, another step's) resolves to nothing, so a row edited in the table
   * cannot make a rollback run an unrelated undo.
   */
  resolveCompensation(
    workflowName: string,
    stepKey: string,
    compensationFn: string,
    version?: number | null,
  ): RegisteredCompensation | undefined {
    const versions = this.workflows.get(workflowName);
    if (!versions) return undefined;
    const candidates = version === undefined ? [...versions.values()].reverse() : [versions.get(version ?? 1)];
    for (const workflow of candidates) {
      const compensation = workflow?.compensations.get(stepKey);
      if (compensation?.name === compensationFn) return compensation;
    }
    return undefined;
  }
}
