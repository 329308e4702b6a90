import { Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { Client } from 'pg';
import { TASK_FINISHED_CHANNEL, TASK_SUBMITTED_CHANNEL, TASK_TALK_CHANNEL } from '../domain/duraflow.constants';
import { describeError } from '../util/describe-error';
import { DuraflowDatabase } from '../persistence/duraflow-database';

type Listener = (payload: string) => void;

/**
 * One LISTEN connection per process for both channels, shared by the worker (wake on
 * submit, abort on cancel) and `waitFor`. It reconnects by itself; while it is down,
 * everyone falls back to polling, so a lost notification only costs latency. Behind pgbouncer in
 * transaction mode without `listenUrl` it never LISTENs (a LISTEN through the pooler would hear
 * nothing, or another client's server connection): polling only, said once at boot.
 */
@Injectable()
export class TaskNotifications implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('Duraflow');
  private readonly listeners = new Map<string, Set<Listener>>([
    [TASK_SUBMITTED_CHANNEL, new Set()],
    [TASK_FINISHED_CHANNEL, new Set()],
    [TASK_TALK_CHANNEL, new Set()],
  ]);
  private client: Client | undefined;
  private connecting: Promise<void> | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private failures = 0;
  /** When LISTEN last came up (undefined while down), and when a notification was last heard. */
  private listeningSince: number | undefined;
  private readonly lostListeners = new Set<() => void>();
  private lastHeardAt = 0;

  constructor(private readonly db: DuraflowDatabase) {}

  onModuleInit(): void {
    if (!this.db.sessionsDirect) {
      this.logger.warn(
        "pooler 'pgbouncer-transaction' without listenUrl: no LISTEN through the pooler, so workers poll every " +
          'pollIntervalMs (no idle backoff) and waitFor polls; give listenUrl (a direct connection) to be woken by NOTIFY.',
      );
    }
  }

  onSubmitted(listener: Listener): () => void {
    return this.subscribe(TASK_SUBMITTED_CHANNEL, listener);
  }

  onFinished(listener: Listener): () => void {
    return this.subscribe(TASK_FINISHED_CHANNEL, listener);
  }

  /** A run set an event or wrote to a stream (payload: its task id): getEvent and readStream wake on it. */
  onTalk(listener: Listener): () => void {
    return this.subscribe(TASK_TALK_CHANNEL, listener);
  }

  /** Resolves once LISTEN is in place (or the first attempt failed: callers poll anyway). */
  ensureListening(): Promise<void> {
    if (this.closed || this.client || !this.db.sessionsDirect) return Promise.resolve();
    this.connecting ??= this.connect().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  get listening(): boolean {
    return this.client !== undefined;
  }

  /** Called each time the LISTEN connection is lost: until it is back, only a poll finds new tasks. */
  onListenLost(listener: () => void): () => void {
    this.lostListeners.add(listener);
    return () => this.lostListeners.delete(listener);
  }

  /**
   * True when LISTEN has been up since `time` (ms since the epoch) and heard nothing since:
   * nothing was submitted or finished anywhere on the database. Lets idle loops slow down.
   */
  quietSince(time: number): boolean {
    return this.listeningSince !== undefined && this.listeningSince <= time && this.lastHeardAt < time;
  }

  async onApplicationShutdown(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    await this.connecting?.catch(() => undefined);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private subscribe(channel: string, listener: Listener): () => void {
    this.listeners.get(channel)!.add(listener);
    void this.ensureListening();
    return () => this.listeners.get(channel)!.delete(listener);
  }

  private async connect(): Promise<void> {
    const client = this.db.createDedicatedClient();
    client.on('error', (error) => this.onConnectionLost(client, error));
    client.on('end', () => this.onConnectionLost(client, new Error('connection ended')));
    client.on('notification', (message) => {
      this.lastHeardAt = Date.now();
      // A finished notification may name several tasks (a batch of completions): "id,id,...".
      const payloads = message.channel === TASK_FINISHED_CHANNEL ? (message.payload ?? '').split(',') : [message.payload ?? ''];
      for (const listener of this.listeners.get(message.channel) ?? []) {
        for (const payload of payloads) listener(payload);
      }
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${TASK_SUBMITTED_CHANNEL}; LISTEN ${TASK_FINISHED_CHANNEL}; LISTEN ${TASK_TALK_CHANNEL}`);
    } catch (error) {
      client.removeAllListeners('end');
      await client.end().catch(() => undefined);
      this.scheduleReconnect(error);
      return;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    if (this.failures > 0) this.logger.log('LISTEN connection restored');
    this.failures = 0;
    this.client = client;
    this.listeningSince = Date.now();
  }

  private onConnectionLost(client: Client, error: Error): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.listeningSince = undefined;
    for (const listener of this.lostListeners) listener();
    client.removeAllListeners('end');
    client.end().catch(() => undefined);
    this.scheduleReconnect(error);
  }

  private scheduleReconnect(error: unknown): void {
    if (this.closed) return;
    if (this.failures === 0) {
      this.logger.warn(`LISTEN connection lost (${describeError(error).message}); polling until it is back`);
    }
    this.failures++;
    const delay = Math.min(5_000, 100 * 2 ** Math.min(this.failures, 6));
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => void this.ensureListening(), delay);
    this.reconnectTimer.unref();
  }
}
