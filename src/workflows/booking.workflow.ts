import { Logger } from '@nestjs/common';
import { workflow, WorkflowContext } from '@duraflow/nestjs';

const logger = new Logger('Booking');

export type BookingLeg = 'flight' | 'hotel' | 'car';

export interface BookingInput {
  customer: string;
  from: string;
  to: string;
  /** Makes that leg fail, to show the saga on demand. */
  failAt?: BookingLeg;
}

function book(leg: BookingLeg, input: BookingInput) {
  if (input.failAt === leg) throw new Error(`${leg} booking failed for ${input.customer} (failAt=${leg})`);
  return { leg, reference: `${leg}-${input.customer}-${input.from}-${input.to}` };
}

/** The seeds' booking workflow, in the functional form with its compensations. */
export const bookingWorkflow = workflow(
  'booking',
  async (ctx: WorkflowContext<BookingInput>) => {
    const flight = await ctx.step.run('book-flight', () => book('flight', ctx.input));
    const hotel = await ctx.step.run('book-hotel', () => book('hotel', ctx.input));
    const car = await ctx.step.run('book-car', () => book('car', ctx.input));
    return { flight: flight.reference, hotel: hotel.reference, car: car.reference };
  },
  {
    compensations: {
      'book-flight': (flight: { reference: string }) => logger.log(`cancelled ${flight.reference}`),
      'book-hotel': (hotel: { reference: string }) => logger.log(`cancelled ${hotel.reference}`),
      'book-car': (car: { reference: string }) => logger.log(`cancelled ${car.reference}`),
    },
  },
);
