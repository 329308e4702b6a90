import { IsNotEmpty, IsString } from 'class-validator';
import { workflow, WorkflowContext } from '@duraflow/nestjs';

export class OrderPlacedEvent {
  @IsString()
  @IsNotEmpty()
  orderId: string;
}

/**
 * Events that start workflows, as an example: every `order.placed` event (`POST /events/order.placed`,
 * gRPC PublishEvent, `SELECT duraflow_publish('order.placed', ...)`) starts one task with the
 * event's payload as input; a payload without an orderId is recorded as refused.
 */
export const orderPlacedWorkflow = workflow(
  'order-placed-notice',
  async (ctx: WorkflowContext<OrderPlacedEvent>) => ctx.step.run('notice', () => ({ noticed: ctx.input.orderId })),
  { on: 'order.placed', input: OrderPlacedEvent },
);
