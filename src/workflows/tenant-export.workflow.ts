import { IsInt, IsNotEmpty, IsOptional, IsString, Max, Min } from 'class-validator';
import { workflow, WorkflowContext } from '@duraflow/nestjs';

export class TenantExportInput {
  @IsString()
  @IsNotEmpty()
  tenant: string;

  /** How long the export step takes, in ms (an external API call, in a real app); default 50. */
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(60_000)
  durationMs?: number;
}

/**
 * Flow control, as an example: at most 4 exports run at once across every engine node, at most 1
 * per tenant, and at most 60 start per minute. `GET /limits` (gRPC ListLimits) shows what waits
 * on which limit.
 */
export const tenantExportWorkflow = workflow(
  'tenant-export',
  async (ctx: WorkflowContext<TenantExportInput>) =>
    ctx.step.run('export', async ({ signal }) => {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, ctx.input.durationMs ?? 50);
        signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
      });
      return { tenant: ctx.input.tenant, exportedAt: new Date().toISOString() };
    }),
  {
    input: TenantExportInput,
    concurrency: 4,
    concurrencyKey: (input: TenantExportInput) => input.tenant,
    keyConcurrency: 1,
    rateLimit: { limit: 60, periodMs: 60_000 },
  },
);
