import { Logger } from '@nestjs/common';
import { IsIn, IsInt, IsNotEmpty, IsOptional, IsString, Max, Min } from 'class-validator';
import { setTimeout as sleep } from 'node:timers/promises';
import { CompensationContext, workflow, WorkflowContext } from '@duraflow/nestjs';

const logger = new Logger('Booking');

export const BOOKING_LEGS = ['flight', 'hotel', 'car'] as const;
export type BookingLeg = (typeof BOOKING_LEGS)[number];

/** Checked at submit: a bad booking is refused with its violations before anything is written. */
export class BookingInput {
  @IsString()
  @IsNotEmpty()
  customer: string;

  @IsString()
  @IsNotEmpty()
  from: string;

  @IsString()
  @IsNotEmpty()
  to: string;

  /** Makes that leg fail, to show the saga on demand. */
  @IsOptional()
  @IsIn(BOOKING_LEGS)
  failAt?: BookingLeg;

  /**
   * How many times each booked leg's cancellation fails before it works, to show the
   * dead-letter queue: over the compensation's 3 attempts, the rest is left to a retry from
   * the API (`POST /dead-letters/:id/retry`). Counted in this engine's memory.
   */
  @IsOptional()
  @Max(10)
  @Min(0)
  @IsInt()
  cancelFailures?: number;

  /** How long each leg takes to book (ms), to watch a task run or stop the engine under it. */
  @IsOptional()
  @Max(600_000)
  @Min(0)
  @IsInt()
  legMs?: number;
}

/** A booked leg, as its step saved it: what its cancellation needs. */
interface BookedLeg {
  leg: BookingLeg;
  reference: string;
  cancelFailures?: number;
}

async function book(leg: BookingLeg, input: BookingInput, signal: AbortSignal): Promise<BookedLeg> {
  if (input.legMs) await sleep(input.legMs, undefined, { signal });
  if (input.failAt === leg) throw new Error(`${leg} booking failed for ${input.customer} (failAt=${leg})`);
  return {
    leg,
    reference: `${leg}-${input.customer}-${input.from}-${input.to}`,
    ...(input.cancelFailures ? { cancelFailures: input.cancelFailures } : {}),
  };
}

/** Cancellations tried so far, per task and step, for `cancelFailures`. */
const cancellationsTried = new Map<string, number>();

function cancel(booked: BookedLeg, ctx: CompensationContext): void {
  const key = `${ctx.runId}:${ctx.stepKey}`;
  const tried = (cancellationsTried.get(key) ?? 0) + 1;
  if (tried <= (booked.cancelFailures ?? 0)) {
    cancellationsTried.set(key, tried);
    throw new Error(`cancelling ${booked.reference} failed (try ${tried} of the ${booked.cancelFailures} that fail: cancelFailures)`);
  }
  cancellationsTried.delete(key);
  logger.log(`cancelled ${booked.reference}`);
}

/**
 * A booking workflow, in the functional form: flight, hotel, car. When a leg
 * fails, the legs already booked are cancelled newest first and the task ends `rolled_back`
 * (`partial_rollback`, with dead letters, when a cancellation fails for good).
 */
export const bookingWorkflow = workflow(
  'booking',
  async (ctx: WorkflowContext<BookingInput>) => {
    const flight = await ctx.step.run('book-flight', ({ signal }) => book('flight', ctx.input, signal));
    const hotel = await ctx.step.run('book-hotel', ({ signal }) => book('hotel', ctx.input, signal));
    const car = await ctx.step.run('book-car', ({ signal }) => book('car', ctx.input, signal));
    return { flight: flight.reference, hotel: hotel.reference, car: car.reference };
  },
  {
    input: BookingInput,
    compensations: { 'book-flight': cancel, 'book-hotel': cancel, 'book-car': cancel },
  },
);
