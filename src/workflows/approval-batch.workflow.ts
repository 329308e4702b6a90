import { ArrayMaxSize, ArrayMinSize, IsArray, IsNotEmpty, IsString } from 'class-validator';
import { workflow, WorkflowContext } from '@duraflow/nestjs';

export class ApprovalBatchInput {
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(20)
  @IsString({ each: true })
  @IsNotEmpty({ each: true })
  requests: string[];
}

/**
 * Starts one `approval` child per request (each waits for its own `approval` signal) and ends:
 * `GET /tasks/:id` lists the children in `childTaskIds`, each child names it in `parentTaskId`.
 */
export const approvalBatchWorkflow = workflow(
  'approval-batch',
  async (ctx: WorkflowContext<ApprovalBatchInput>) => {
    const children: string[] = [];
    for (const [index, request] of ctx.input.requests.entries()) {
      children.push((await ctx.startChild(`approval-${index + 1}`, 'approval', { request })).id);
    }
    return { children };
  },
  { input: ApprovalBatchInput },
);
