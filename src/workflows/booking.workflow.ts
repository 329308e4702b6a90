import { Logger } from '@nestjs/common';
import { IsIn, IsNotEmpty, IsOptional, IsString } from 'class-validator';
import { workflow, WorkflowContext } from '@duraflow/nestjs';

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
}

function book(leg: BookingLeg, input: BookingInput) {
  if (input.failAt === leg) throw new Error(`${leg} booking failed for ${input.customer} (failAt=${leg})`);
  return { leg, reference: `${leg}-${input.customer}-${input.from}-${input.to}` };
}

/**
 * The seeds' booking workflow, in the functional form: flight, hotel, car. When a leg
 * fails, the legs already booked are cancelled newest first and the task ends `rolled_back`.
 */
export const bookingWorkflow = workflow(
  'booking',
  async (ctx: WorkflowContext<BookingInput>) => {
    const flight = await ctx.step.run('book-flight', () => book('flight', ctx.input));
    const hotel = await ctx.step.run('book-hotel', () => book('hotel', ctx.input));
    const car = await ctx.step.run('book-car', () => book('car', ctx.input));
    return { flight: flight.reference, hotel: hotel.reference, car: car.reference };
  },
  {
    input: BookingInput,
    compensations: {
      'book-flight': (flight: { reference: string }) => logger.log(`cancelled ${flight.reference}`),
      'book-hotel': (hotel: { reference: string }) => logger.log(`cancelled ${hotel.reference}`),
      'book-car': (car: { reference: string }) => logger.log(`cancelled ${car.reference}`),
    },
  },
);
