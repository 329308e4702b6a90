import { Injectable, Type } from '@nestjs/common';
import { ResolvedStepOptions } from '../duraflow.options';
import { DuplicateWorkflowError, UnknownWorkflowError } from '../errors';
import { CompensationFn } from '../interfaces/workflow-definition';
import { WorkflowContext } from '../interfaces/workflow-context';
import { UnknownInputProperties } from '../validation/dto-input';

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
}

/** Every workflow this process knows, filled at boot by the explorer. */
@Injectable()
export class WorkflowRegistry {
  private readonly workflows = new Map<string, RegisteredWorkflow>();
  private readonly compensationsByName = new Map<string, RegisteredCompensation>();

  register(workflow: RegisteredWorkflow): void {
    const existing = this.workflows.get(workflow.name);
    if (existing) throw new DuplicateWorkflowError(workflow.name, existing.source, workflow.source);
    this.workflows.set(workflow.name, workflow);
    for (const compensation of workflow.compensations.values()) {
      this.compensationsByName.set(compensation.name, compensation);
    }
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

  /** The compensation a `step_runs.compensation_fn` value names, in this process. */
  resolveCompensation(name: string): RegisteredCompensation | undefined {
    return this.compensationsByName.get(name);
  }
}
