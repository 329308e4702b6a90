import { FunctionalWorkflowDefinition, FunctionalWorkflowOptions } from '../domain/workflow-definition';
import { WorkflowContext } from '../domain/workflow-context';

/**
 * A workflow without a class: `workflow('payment', async (ctx) => ..., { compensations })`.
 * Validated when the module boots, with the decorated classes.
 */
export function workflow<TInput = any, TOutput = any>(
  name: string,
  run: (ctx: WorkflowContext<TInput>) => Promise<TOutput> | TOutput,
  options: FunctionalWorkflowOptions = {},
): FunctionalWorkflowDefinition<TInput, TOutput> {
  return Object.freeze({ kind: 'functional-workflow' as const, name, run, options });
}
