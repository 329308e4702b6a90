import { Injectable, OnApplicationShutdown } from '@nestjs/common';

/** Wake-ups remembered at once; later ones are left to the poll. */
const MAX_WAKE_UPS = 10_000;
/** setTimeout's longest delay; a wake-up further off is re-armed on the way. */
const MAX_TIMEOUT_MS = 2_147_483_647;

/**
 * The process's timer for tasks that wait until a time (a sleep's end, a signal wait's
 * timeout): at each wake-up time it tells its listeners (the worker claims), so a sleeping task
 * wakes within milliseconds of its time instead of at the next poll. It holds the wake-ups this
 * process knows of, nearest first, with one timer armed for the nearest; the poll still finds
 * the tasks whose wake-up this process never heard of (another worker suspended them and died).
 *
 * A wake-up is told once it is due by this host's clock, never before (a timer that fires early
 * re-arms); the run arms it a millisecond past the time the database gave (RunPrimitives.armWakeUp),
 * so the claim it sets off finds the task runnable.
 *
 * States: idle (no wake-up held, no timer) -> armed (a timer for the nearest) -> on firing,
 * every wake-up now due is dropped, the listeners are told once, and it re-arms or goes idle.
 */
@Injectable()
export class WakeUpTimer implements OnApplicationShutdown {
  private readonly due: number[] = [];
  private readonly listeners = new Set<() => void>();
  private timer: NodeJS.Timeout | undefined;
  private armedFor = Infinity;

  onWake(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Tell the listeners at `at` (a time in the past tells them on the next turn). */
  wakeAt(at: Date): void {
    const time = at.getTime();
    if (!Number.isFinite(time)) return;
    let index = this.due.length;
    while (index > 0 && this.due[index - 1] > time) index--;
    if (index >= MAX_WAKE_UPS) return;
    this.due.splice(index, 0, time);
    if (this.due.length > MAX_WAKE_UPS) this.due.pop();
    this.arm();
  }

  /** Wake-ups held now. */
  get pending(): number {
    return this.due.length;
  }

  onApplicationShutdown(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.due.length = 0;
  }

  private arm(): void {
    const next = this.due[0];
    if (next === undefined || next >= this.armedFor) return;
    clearTimeout(this.timer);
    this.armedFor = next;
    this.timer = setTimeout(() => this.fire(), Math.min(MAX_TIMEOUT_MS, Math.max(0, next - Date.now())));
    this.timer.unref();
  }

  private fire(): void {
    this.timer = undefined;
    this.armedFor = Infinity;
    const now = Date.now();
    let count = 0;
    while (count < this.due.length && this.due[count] <= now) count++;
    this.due.splice(0, count);
    if (count > 0) for (const listener of this.listeners) listener();
    this.arm();
  }
}
