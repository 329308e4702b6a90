import { Injectable } from '@nestjs/common';

export interface FlightBooking {
  flightRef: string;
}
export interface HotelBooking {
  hotelRef: string;
}
export interface Payment {
  paymentRef: string;
}

/** The travel agency's partners (an airline, a hotel chain, a payment provider): this app's side effects. */
@Injectable()
export class TravelService {
  async bookFlight(bookingRef: string, flight: string): Promise<FlightBooking> {
    return { flightRef: `FL-${flight}-${bookingRef}` };
  }

  async cancelFlight(_flightRef: string): Promise<void> {}

  async bookHotel(bookingRef: string, hotel: string): Promise<HotelBooking> {
    return { hotelRef: `HT-${hotel}-${bookingRef}` };
  }

  async cancelHotel(_hotelRef: string): Promise<void> {}

  async charge(bookingRef: string, amount: number): Promise<Payment> {
    return { paymentRef: `PAY-${bookingRef}-${amount}` };
  }
}
