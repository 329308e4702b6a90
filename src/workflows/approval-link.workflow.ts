import { IsInt, IsNotEmpty, IsOptional, IsString, Min } from 'class-validator';
import { CallbackTimeoutError, workflow, WorkflowContext } from '@duraflow/nestjs';

export class ApprovalLinkInput {
  @IsString()
  @IsNotEmpty()
  request: string;

  /** How long the link takes a decision; default one day. */
  @IsOptional()
  @IsInt()
  @Min(0)
  timeoutMs?: number;
}

/**
 * Waits for a decision POSTed to a callback url (the engine needs DURAFLOW_CALLBACK_BASE_URL and
 * DURAFLOW_CALLBACK_SECRET): the url is the output of the step `callback:decision` (GET
 * /tasks/:id/steps), to be sent to whoever decides; `POST <url>` with `{ "approved": true }`
 * needs no API key (the url's signed token is the credential). Past the timeout it ends
 * `{ approved: false, timedOut: true }`.
 */
export const approvalLinkWorkflow = workflow(
  'approval-link',
  async (ctx: WorkflowContext<ApprovalLinkInput>) => {
    const link = await ctx.createCallback('decision', { timeoutMs: ctx.input.timeoutMs ?? 86_400_000 });
    try {
      const decision = await ctx.waitForCallback<{ approved?: boolean } | null>(link);
      return { request: ctx.input.request, approved: decision?.approved === true };
    } catch (error) {
      if (error instanceof CallbackTimeoutError) return { request: ctx.input.request, approved: false, timedOut: true };
      throw error;
    }
  },
  { input: ApprovalLinkInput },
);
