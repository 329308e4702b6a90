import { Injectable } from '@nestjs/common';

export interface Reservation {
  id: string;
  sku: string;
  quantity: number;
}

/** Stands in for the host's own stock system: the workflow reaches it through ordinary DI. */
@Injectable()
export class WarehouseService {
  private readonly reservations = new Map<string, Reservation>();

  reserve(orderId: number, sku: string, quantity: number): Reservation {
    const reservation = { id: `reservation-${orderId}`, sku, quantity };
    this.reservations.set(reservation.id, reservation);
    return reservation;
  }

  release(reservationId: string): void {
    this.reservations.delete(reservationId);
  }
}
