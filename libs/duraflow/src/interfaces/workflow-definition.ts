import type { UnknownInputProperties } from '../validation/dto-input';
import { FlowControlOptions } from './flow-control';
import { StepOptions, WorkflowContext } from './workflow-context';

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

export interface WorkflowOptions extends FlowControlOptions {
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
