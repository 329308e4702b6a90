import { Body, Controller, Get, NotFoundException, Param, ParseIntPipe, Post } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { DataSource, Repository } from 'typeorm';
import { WorkflowService } from '@duraflow/nestjs';
import { Order } from './order.entity.js';

interface PlaceOrderBody {
  sku: string;
  quantity: number;
}

@Controller('orders')
export class OrdersController {
  constructor(
    private readonly dataSource: DataSource,
    private readonly workflows: WorkflowService,
    @InjectRepository(Order) private readonly orders: Repository<Order>,
  ) {}

  /** The order and its fulfilment task commit together, or neither exists. */
  @Post()
  async place(@Body() body: PlaceOrderBody): Promise<{ orderId: number; taskId: string }> {
    return this.dataSource.transaction(async (manager) => {
      const order = await manager.save(manager.create(Order, { sku: body.sku, quantity: body.quantity }));
      const task = await this.workflows.submit(
        'fulfil-order',
        { orderId: order.id, sku: body.sku, quantity: body.quantity },
        { manager, idempotencyKey: `order-${order.id}` },
      );
      await manager.update(Order, { id: order.id }, { taskId: task.id });
      return { orderId: order.id, taskId: task.id };
    });
  }

  @Get(':id')
  async get(@Param('id', ParseIntPipe) id: number) {
    const order = await this.orders.findOneBy({ id });
    if (!order) throw new NotFoundException(`No order ${id}`);
    const task = order.taskId ? await this.workflows.get(order.taskId) : null;
    return { order, task: task && { id: task.id, status: task.status, output: task.output, error: task.error } };
  }
}
