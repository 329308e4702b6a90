import { Injectable } from '@nestjs/common';

/** Wrong keys an address may send before it has to wait. */
const FREE_FAILURES = 5;
/** The first wait; each further wrong key doubles it, up to MAX_WAIT_MS. */
const FIRST_WAIT_MS = 10_000;
const MAX_WAIT_MS = 15 * 60_000;
/** An address with no wrong key for this long starts afresh. */
const FORGET_AFTER_MS = 60 * 60_000;
/** Addresses tracked at once; past it the one that failed least recently is forgotten. */
const MAX_TRACKED = 10_000;

interface Failures {
  count: number;
  lastAt: number;
  lockedUntil: number;
}

/**
 * Slows down guessing the API key through the dashboard's sign-in form: per client address
 * (`request.ip`: the proxy's client with DURAFLOW_TRUST_PROXY, else the peer), four wrong keys
 * are free; the fifth makes the next attempt wait 10 s, each further one doubles it, up to 15 min;
 * during a wait every attempt, the right key included, is answered 429 with Retry-After. A right
 * key forgets the address's failures. Memory is bounded (10,000 addresses).
 */
@Injectable()
export class SignInThrottle {
  private readonly failures = new Map<string, Failures>();

  /** Seconds `address` must still wait before its next attempt, or 0. */
  waitSeconds(address: string, now = Date.now()): number {
    const entry = this.failures.get(address);
    if (!entry) return 0;
    if (now - entry.lastAt >= FORGET_AFTER_MS) {
      this.failures.delete(address);
      return 0;
    }
    return entry.lockedUntil > now ? Math.ceil((entry.lockedUntil - now) / 1000) : 0;
  }

  failed(address: string, now = Date.now()): void {
    const previous = this.failures.get(address);
    const count = previous && now - previous.lastAt < FORGET_AFTER_MS ? previous.count + 1 : 1;
    // Re-inserted, so the map's first entry is the one that failed least recently.
    this.failures.delete(address);
    if (this.failures.size >= MAX_TRACKED) this.failures.delete(this.failures.keys().next().value!);
    const wait = count >= FREE_FAILURES ? Math.min(MAX_WAIT_MS, FIRST_WAIT_MS * 2 ** (count - FREE_FAILURES)) : 0;
    this.failures.set(address, { count, lastAt: now, lockedUntil: now + wait });
  }

  succeeded(address: string): void {
    this.failures.delete(address);
  }
}
