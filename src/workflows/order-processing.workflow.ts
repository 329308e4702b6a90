import { Injectable, Logger } from '@nestjs/common';
import { IsInt, IsNotEmpty, IsOptional, IsString, Min } from 'class-validator';
import { Compensate, Step, Workflow, WorkflowContext } from '@duraflow/nestjs';

export class OrderInput {
  @IsString()
  @IsNotEmpty()
  orderId: string;

  @IsOptional()
  @IsInt()
  @Min(0)
  amountCents?: number;
}

/** Stands in for the payment and shipping providers an order workflow would call. */
@Injectable()
export class OrderGateway {
  private readonly logger = new Logger('OrderGateway');

  charge(orderId: string, amountCents: number) {
    this.logger.log(`charged ${amountCents} for order ${orderId}`);
    return { chargeId: `ch_${orderId}`, amountCents };
  }

  refund(chargeId: string) {
    this.logger.log(`refunded ${chargeId}`);
  }

  ship(orderId: string) {
    return { trackingNumber: `trk_${orderId}` };
  }
}

/** An order-processing workflow, written with decorators on an injected service. */
@Workflow('order-processing', { input: OrderInput, maxRetries: 3 })
export class OrderProcessingWorkflow {
  constructor(private readonly gateway: OrderGateway) {}

  async run(ctx: WorkflowContext<OrderInput>) {
    const order = await this.validateOrder(ctx.input);
    const charge = await this.chargeCard(order.orderId, order.amountCents);
    const shipment = await this.ship(order.orderId);
    return { orderId: order.orderId, chargeId: charge.chargeId, trackingNumber: shipment.trackingNumber };
  }

  @Step('validate-order')
  validateOrder(input: OrderInput) {
    return { orderId: input.orderId, amountCents: input.amountCents ?? 0 };
  }

  @Step('charge-card', { retries: 3, timeout: 30_000 })
  chargeCard(orderId: string, amountCents: number) {
    return this.gateway.charge(orderId, amountCents);
  }

  @Compensate('charge-card')
  refundCard(charge: { chargeId: string }) {
    return this.gateway.refund(charge.chargeId);
  }

  @Step('ship-order', { retries: 2 })
  ship(orderId: string) {
    return this.gateway.ship(orderId);
  }
}
