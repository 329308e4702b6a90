import { IsInt, IsNotEmpty, IsOptional, IsString, Min } from 'class-validator';
import { SignalTimeoutError, workflow, WorkflowContext } from '@duraflow/nestjs';

export class ApprovalInput {
  @IsString()
  @IsNotEmpty()
  request: string;

  /** How long to wait for the `approval` signal; default one day. */
  @IsOptional()
  @IsInt()
  @Min(0)
  timeoutMs?: number;
}

/**
 * Waits for a person's decision: `POST /tasks/:id/signals/approval` with `{ "payload": { "approved": true } }`
 * (or gRPC SignalTask). While it waits the task is `pending` and holds no worker slot; past the
 * timeout it ends `{ approved: false, timedOut: true }`.
 */
export const approvalWorkflow = workflow(
  'approval',
  async (ctx: WorkflowContext<ApprovalInput>) => {
    const requested = await ctx.step.run('record-request', () => ({ request: ctx.input.request, at: new Date().toISOString() }));
    try {
      const decision = await ctx.waitForSignal<{ approved?: boolean; by?: string }>('approval', {
        timeoutMs: ctx.input.timeoutMs ?? 86_400_000,
      });
      return { ...requested, approved: decision?.approved === true, by: decision?.by ?? null };
    } catch (error) {
      if (error instanceof SignalTimeoutError) return { ...requested, approved: false, timedOut: true };
      throw error;
    }
  },
  { input: ApprovalInput },
);
