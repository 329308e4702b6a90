import { SagaService, TaskStatus } from '@duraflow/nestjs';
import { createDuraflowTestEnv, DuraflowTestEnv } from '@duraflow/nestjs/testing';
import { BookingWorkflow } from '../src/bookings/booking.workflow.js';
import { TravelService } from '../src/bookings/travel.service.js';

/** The travel partners, recorded: what the saga did to them, in order. */
class FakeTravel extends TravelService {
  calls: string[] = [];
  cancelFlightFailures = 0;

  override async bookFlight(bookingRef: string, flight: string) {
    this.calls.push('book-flight');
    return super.bookFlight(bookingRef, flight);
  }
  override async cancelFlight(_flightRef: string) {
    this.calls.push('cancel-flight');
    if (this.cancelFlightFailures-- > 0) throw new Error('The airline is down');
  }
  override async bookHotel(bookingRef: string, hotel: string) {
    this.calls.push('book-hotel');
    return super.bookHotel(bookingRef, hotel);
  }
  override async cancelHotel(_hotelRef: string) {
    this.calls.push('cancel-hotel');
  }
  override async charge(bookingRef: string, amount: number) {
    this.calls.push('charge');
    return super.charge(bookingRef, amount);
  }
}

const input = { bookingRef: 'B-1', flight: 'AMS-LIS', hotel: 'LIS-7', amount: 420 };

describe('the booking saga', () => {
  let env: DuraflowTestEnv;
  let travel: FakeTravel;

  beforeEach(async () => {
    travel = new FakeTravel();
    env = await createDuraflowTestEnv({
      providers: [BookingWorkflow, TravelService],
      overrides: [{ provide: TravelService, useValue: travel }],
    });
  });
  afterEach(() => env.close());

  it('charges once the 24-hour free cancellation is over, not before', async () => {
    const task = await env.workflows.submit('booking', input);
    await env.runUntilIdle();
    expect(travel.calls).toEqual(['book-flight', 'book-hotel']);

    await env.advanceTime('23h');
    expect(travel.calls).not.toContain('charge');

    await env.advanceTime('1h');
    expect(travel.calls).toEqual(['book-flight', 'book-hotel', 'charge']);
    expect((await env.workflows.get(task.id))!.status).toBe(TaskStatus.COMPLETED);
  });

  it('does not book the flight twice when the worker dies between the two bookings', async () => {
    env.crashAfterStep('booking', 'book-flight');
    const task = await env.workflows.submit('booking', input);
    await env.runUntilIdle();
    await env.advanceTime('24h');

    expect((await env.workflows.get(task.id))!.status).toBe(TaskStatus.COMPLETED);
    expect(travel.calls.filter((call) => call === 'book-flight')).toHaveLength(1);
    expect((await env.getSteps(task.id)).map((step) => step.stepKey)).toEqual(['book-flight', 'book-hotel', 'free-cancellation', 'charge']);
  });

  it('puts a failing compensation in the dead-letter queue, and its retry finishes the rollback', async () => {
    env.failStep('booking', 'charge', new Error('Card declined'));
    travel.cancelFlightFailures = 3; // the first attempt and its two retries
    const task = await env.workflows.submit('booking', input);
    await env.runUntilIdle();
    await env.advanceTime('24h');
    await env.advanceTime('10m'); // the charge's retries and their backoff

    expect(travel.calls.slice(-4)).toEqual(['cancel-hotel', 'cancel-flight', 'cancel-flight', 'cancel-flight']);
    expect((await env.workflows.get(task.id))!.status).toBe(TaskStatus.PARTIAL_ROLLBACK);
    const saga = env.get(SagaService);
    const { items } = await saga.listDeadLetters();
    expect(items.map((entry) => entry.taskId)).toEqual([task.id]);

    // The airline is back: the operator (or this test) retries the dead letter.
    const retried = await saga.retryDeadLetter(items[0].id);
    expect(retried.outcome).toBe('compensated');
    expect(retried.task!.status).toBe(TaskStatus.ROLLED_BACK);
  });
});
