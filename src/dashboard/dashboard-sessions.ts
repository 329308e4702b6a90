import { Inject, Injectable } from '@nestjs/common';
import { createHash, randomBytes } from 'node:crypto';
import { EngineConfig } from '../config/engine.config';
import { ENGINE_CONFIG } from '../config/engine-config.token';

/** Signed-in browsers kept at once; past it the oldest session ends (only holders of the key make them). */
const MAX_SESSIONS = 10_000;

interface Session {
  createdAt: number;
  lastUsedAt: number;
}

/**
 * The dashboard's sign-in sessions, kept in this process: a session id is 256 random bits that
 * mean nothing outside this table, so a cookie cannot be computed, only handed out at a sign-in.
 * A session ends after `dashboardSession.idleMs` unused or `maxMs` after the sign-in
 * (DURAFLOW_DASHBOARD_SESSION_IDLE / _MAX), at sign-out (the server forgets it, whatever copy of
 * the cookie remains), and when the engine restarts. Sessions are per engine process: behind a
 * load balancer with several engines, route a browser to one of them (sticky sessions), or sign
 * in again where it lands.
 */
@Injectable()
export class DashboardSessions {
  /** By the id's digest: the table never holds a usable cookie. */
  private readonly sessions = new Map<string, Session>();
  private readonly idleMs: number;
  private readonly maxMs: number;

  constructor(@Inject(ENGINE_CONFIG) config: EngineConfig) {
    ({ idleMs: this.idleMs, maxMs: this.maxMs } = config.dashboardSession);
  }

  /** How long a session can live at most, for the cookie's Max-Age. */
  get maxAgeMs(): number {
    return this.maxMs;
  }

  /** A new session; its id is the cookie's value. */
  create(now = Date.now()): string {
    if (this.sessions.size >= MAX_SESSIONS) this.sweep(now);
    if (this.sessions.size >= MAX_SESSIONS) this.sessions.delete(this.sessions.keys().next().value!);
    const id = randomBytes(32).toString('base64url');
    this.sessions.set(digest(id), { createdAt: now, lastUsedAt: now });
    return id;
  }

  /** Whether `id` names a live session; using it keeps it from going idle. */
  use(id: string | undefined, now = Date.now()): boolean {
    if (!id) return false;
    const key = digest(id);
    const session = this.sessions.get(key);
    if (!session) return false;
    if (this.expired(session, now)) {
      this.sessions.delete(key);
      return false;
    }
    session.lastUsedAt = now;
    return true;
  }

  /** Ends a session (sign-out). */
  end(id: string | undefined): void {
    if (id) this.sessions.delete(digest(id));
  }

  private expired(session: Session, now: number): boolean {
    return now - session.lastUsedAt >= this.idleMs || now - session.createdAt >= this.maxMs;
  }

  private sweep(now: number): void {
    for (const [key, session] of this.sessions) if (this.expired(session, now)) this.sessions.delete(key);
  }
}

function digest(id: string): string {
  return createHash('sha256').update(id, 'utf8').digest('base64url');
}
