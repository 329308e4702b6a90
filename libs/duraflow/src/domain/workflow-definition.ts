import type { WorkflowScheduleOptions } from './schedule-options';
import type { WorkflowEventOptions } from './event-options';
import { FlowControlOptions } from './flow-control';
import { StepOptions, WorkflowContext } from './workflow-context';

/** What submit does with input properties a workflow's DTO does not declare. */
export type UnknownInputProperties = 'strip' | 'reject';

export const UNKNOWN_INPUT_PROPERTIES: readonly UnknownInputProperties[] = ['strip', 'reject'];

/** A compensation: receives the saved output of the step it undoes. */
export type CompensationFn<TOutput = any> = (output: TOutput, ctx: CompensationContext) => unknown | Promise<unknown>;

export interface CompensationContext {
  /** The task id. */
  readonly runId: string;
  readonly workflowName: string;
  /** The step being undone. */
  readonly stepKey: string;
  /** Aborted when the attempt times out or the rollback's worker loses the task. */
  readonly signal: AbortSignal;
  /** 1 for the first attempt of this compensation, 2 for the first retry, and so on. */
  readonly attempt: number;
}

export interface WorkflowOptions extends FlowControlOptions, WorkflowEventOptions {
  /**
   * class-validator DTO the input must satisfy at submit (needs the class-validator and
   * class-transformer packages). The input is stored as validated: see `unknownInputProperties`.
   */
  input?: new (...args: any[]) => object;
  /**
   * Input properties the `input` DTO does not declare: `'strip'` removes them before the input
   * is stored, `'reject'` refuses the submit (InputValidationError). Default: the module's
   * `unknownInputProperties` (`'strip'`).
   */
  unknownInputProperties?: UnknownInputProperties;
  /** Default `maxRetries` of tasks of this workflow (recoveries after a worker died). */
  maxRetries?: number;
  /** Default options of every step of this workflow. */
  step?: StepOptions;
  /** Default options (timeout, retries, backoff) of this workflow's compensations. */
  compensation?: StepOptions;
  /**
   * The version of this definition, an integer from 1: tasks keep the version they started on
   * and only a worker that registers it claims them, so several versions (a class or definition
   * each) may be registered side by side while old runs finish. Default: none, which is version 1.
   */
  version?: number;
  /** Start a task of this workflow on a cron schedule (named after the workflow): see docs/schedules.md. */
  schedule?: WorkflowScheduleOptions;
}

export interface FunctionalWorkflowOptions extends WorkflowOptions {
  /** Keyed by step key; each a pure function of the step's saved output. */
  compensations?: Record<string, CompensationFn>;
}

/** What `workflow(name, fn, options)` returns; register it in `DuraflowModule.forRoot({ workflows })`. */
export interface FunctionalWorkflowDefinition<TInput = any, TOutput = any> {
  readonly kind: 'functional-workflow';
  readonly name: string;
  readonly run: (ctx: WorkflowContext<TInput>) => Promise<TOutput> | TOutput;
  readonly options: FunctionalWorkflowOptions;
}
