import { Compensate, Step, Workflow, WorkflowContext } from '@duraflow/nestjs';
import { type FlightBooking, type HotelBooking, type Payment, TravelService } from './travel.service.js';

export interface BookingInput {
  bookingRef: string;
  flight: string;
  hotel: string;
  amount: number;
}

/** A day to cancel for free between the reservation and the charge. */
export const FREE_CANCELLATION_MS = 24 * 60 * 60 * 1000;

/**
 * The booking saga: a flight and a hotel reserved, a day of free cancellation, then the charge.
 * A charge that fails for good undoes the hotel, then the flight.
 */
@Workflow('booking', { maxRetries: 2 })
export class BookingWorkflow {
  constructor(private readonly travel: TravelService) {}

  async run(ctx: WorkflowContext<BookingInput>): Promise<{ flight: FlightBooking; hotel: HotelBooking; payment: Payment }> {
    const flight = await this.bookFlight(ctx.input);
    const hotel = await this.bookHotel(ctx.input);
    await ctx.sleep('free-cancellation', FREE_CANCELLATION_MS);
    const payment = await this.charge(ctx.input);
    return { flight, hotel, payment };
  }

  @Step('book-flight')
  bookFlight(input: BookingInput): Promise<FlightBooking> {
    return this.travel.bookFlight(input.bookingRef, input.flight);
  }

  @Compensate('book-flight')
  cancelFlight(flight: FlightBooking): Promise<void> {
    return this.travel.cancelFlight(flight.flightRef);
  }

  @Step('book-hotel')
  bookHotel(input: BookingInput): Promise<HotelBooking> {
    return this.travel.bookHotel(input.bookingRef, input.hotel);
  }

  @Compensate('book-hotel')
  cancelHotel(hotel: HotelBooking): Promise<void> {
    return this.travel.cancelHotel(hotel.hotelRef);
  }

  @Step('charge', { retries: 2, backoff: { initialDelayMs: 60_000, factor: 2, maxDelayMs: 600_000 } })
  charge(input: BookingInput): Promise<Payment> {
    return this.travel.charge(input.bookingRef, input.amount);
  }
}
