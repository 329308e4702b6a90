import { InjectRepository } from '@nestjs/typeorm';
import { IsInt, IsString, Length, Min } from 'class-validator';
import { Repository } from 'typeorm';
import { Compensate, Step, Workflow, WorkflowContext } from '@duraflow/nestjs';
import { Order } from './order.entity.js';
import { type Reservation, WarehouseService } from './warehouse.service.js';

export class FulfilOrderInput {
  @IsInt()
  @Min(1)
  orderId!: number;

  @IsString()
  @Length(1, 64)
  sku!: string;

  @IsInt()
  @Min(1)
  quantity!: number;
}

@Workflow('fulfil-order', { input: FulfilOrderInput, maxRetries: 3 })
export class FulfilOrderWorkflow {
  constructor(
    private readonly warehouse: WarehouseService,
    @InjectRepository(Order) private readonly orders: Repository<Order>,
  ) {}

  async run(ctx: WorkflowContext<FulfilOrderInput>): Promise<{ reservationId: string }> {
    const reservation = await this.reserveStock(ctx.input);
    await ctx.step.run('mark-shipped', async () => {
      await this.orders.update({ id: ctx.input.orderId }, { status: 'shipped' });
    });
    return { reservationId: reservation.id };
  }

  @Step('reserve-stock', { retries: 2 })
  async reserveStock(input: FulfilOrderInput): Promise<Reservation> {
    return this.warehouse.reserve(input.orderId, input.sku, input.quantity);
  }

  @Compensate('reserve-stock')
  releaseStock(reservation: Reservation): void {
    this.warehouse.release(reservation.id);
  }
}
