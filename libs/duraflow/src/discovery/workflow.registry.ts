import { Injectable, Type } from '@nestjs/common';
import { ResolvedStepOptions } from '../duraflow.options';
import { DuplicateWorkflowError, UnknownWorkflowError } from '../errors';
import { CompensationFn } from '../interfaces/workflow-definition';
import { WorkflowContext } from '../interfaces/workflow-context';
import { UnknownInputProperties } from '../validation/dto-input';
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

/** Every workflow this process knows, filled at boot by the explorer. */
@Injectable()
export class WorkflowRegistry {
  private readonly workflows = new Map<string, RegisteredWorkflow>();

  register(workflow: RegisteredWorkflow): void {
    const existing = this.workflows.get(workflow.name);
    if (existing) throw new DuplicateWorkflowError(workflow.name, existing.source, workflow.source);
    this.workflows.set(workflow.name, workflow);
  }

  /** @throws UnknownWorkflowError */
  get(name: string): RegisteredWorkflow {
    const workflow = this.workflows.get(name);
    if (!workflow) throw new UnknownWorkflowError(name, this.names());
    return workflow;
  }

  names(): string[] {
    return [...this.workflows.keys()];
  }

  /**
   * The compensation a step's `step_runs.compensation_fn` names, in this process: only the one
   * the task's own workflow registers for that very step, and only under the name stored. A
   * name that points anywhere else (another workflow's undo, another step's) resolves to
   * nothing, so a row edited in the table cannot make a rollback run an unrelated undo.
   */
  resolveCompensation(workflowName: string, stepKey: string, compensationFn: string): RegisteredCompensation | undefined {
    const compensation = this.workflows.get(workflowName)?.compensations.get(stepKey);
    return compensation?.name === compensationFn ? compensation : undefined;
  }
}
