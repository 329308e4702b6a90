import { Inject, Injectable, Logger } from '@nestjs/common';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { NodeIdInUseError } from '../domain/errors';
import { DuraflowLogger } from '../observability/duraflow-logger';
import { DuraflowDatabase } from '../persistence/duraflow-database';
import { TaskTransitions } from '../persistence/lifecycle/task-transitions';
import { NodeLock, nodeLockApplicationName } from '../persistence/node-lock';
import { describeError } from '../util/describe-error';

type NodeIdentityState = 'unheld' | 'held' | 'lost' | 'taken' | 'closed';

/**
 * This process as a node (`worker.nodeId`): it holds the node's lock (persistence/node-lock.ts)
 * for as long as its worker runs, and takes back at once the tasks the node's earlier processes
 * left running (the recover move). Without a node id it does nothing and never stops a claim.
 *
 * States: unheld -> held (`acquire`, at the worker's start: the lock taken and the node's tasks
 * recovered; NodeIdInUseError when another live process holds it). held -> lost when the lock's
 * session ends (a PostgreSQL restart, a cut connection, a freeze long enough for the server to
 * drop it): no claim while lost, and the lock is tried again every heartbeat interval. lost ->
 * held when it is free again (the tasks of any process of the node that ran meanwhile
 * recovered), or -> taken when another process of the node holds it now: this process's worker
 * stops for good (`onTaken`); a holder that is this process's own old session, or one it cannot
 * name, is waited out (lost still). Any -> closed (`release`, on shutdown).
 */
@Injectable()
export class NodeIdentity {
  private readonly logger = new Logger('Duraflow');
  private readonly taskLogger = new DuraflowLogger();
  private state: NodeIdentityState = 'unheld';
  private lock: NodeLock | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private keepAliveTimer: NodeJS.Timeout | undefined;
  private readonly regainedListeners = new Set<() => void>();
  private readonly takenListeners = new Set<() => void>();

  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly db: DuraflowDatabase,
    private readonly transitions: TaskTransitions,
  ) {}

  get nodeId(): string | undefined {
    return this.options.worker.nodeId;
  }

  /** How often the lock's session is confirmed, and a lost lock tried again. */
  private get intervalMs(): number {
    return this.options.heartbeatIntervalMs;
  }

  /**
   * Takes the node's lock and recovers the tasks the node's earlier processes left running.
   * Throws NodeIdInUseError when another live process holds the lock (and whatever reaching
   * PostgreSQL throws). Without a node id, does nothing.
   */
  async acquire(): Promise<void> {
    const nodeId = this.nodeId;
    if (nodeId === undefined || this.state === 'held') return;
    const taken = await NodeLock.take(this.db, nodeId, this.options.workerId);
    if ('holder' in taken) throw new NodeIdInUseError(nodeId, taken.holder);
    try {
      await this.hold(taken.lock);
    } catch (error) {
      await taken.lock.release();
      throw error;
    }
    this.logger.log(`Node ${nodeId}: this process (${this.options.workerId}) holds the node's lock`);
  }

  /**
   * Whether this process may claim now: always without a node id; with one, only while it holds
   * the lock, confirmed first when its last confirmation is older than two heartbeat intervals
   * (a process that was frozen finds out here that its session ended). Never rejects.
   */
  async mayClaim(): Promise<boolean> {
    if (this.nodeId === undefined) return true;
    if (this.state !== 'held' || !this.lock) return false;
    return this.lock.confirmIfOld(2 * this.intervalMs);
  }

  /** Hears the lock taken again after it was lost (claiming may go on). Returns the unsubscribe. */
  onRegained(listener: () => void): () => void {
    this.regainedListeners.add(listener);
    return () => this.regainedListeners.delete(listener);
  }

  /** Hears that another process of the node holds the lock now: this process must stop claiming for good. */
  onTaken(listener: () => void): () => void {
    this.takenListeners.add(listener);
    return () => this.takenListeners.delete(listener);
  }

  /** Gives the lock up (after the worker stopped). Never throws; idempotent. */
  async release(): Promise<void> {
    this.state = 'closed';
    clearTimeout(this.retryTimer);
    clearInterval(this.keepAliveTimer);
    const lock = this.lock;
    this.lock = undefined;
    await lock?.release();
  }

  /** The lock is held: recover the node's tasks on its session, then keep it confirmed. */
  private async hold(lock: NodeLock): Promise<void> {
    const nodeId = this.nodeId as string;
    const recovered = await this.transitions.recoverNodeTasks(lock.session, nodeId, this.options.workerId);
    if (recovered.length) {
      this.taskLogger.log(`Node ${nodeId}: took back ${recovered.length} task(s) that an earlier process of this node left running`, {
        taskIds: recovered.map((task) => task.id),
      });
    }
    this.lock = lock;
    this.state = 'held';
    lock.onLost((error) => this.lockLost(lock, error));
    clearInterval(this.keepAliveTimer);
    this.keepAliveTimer = setInterval(() => void lock.confirmIfOld(this.intervalMs), this.intervalMs);
    this.keepAliveTimer.unref();
  }

  private lockLost(lock: NodeLock, error: Error): void {
    if (this.lock !== lock || this.state !== 'held') return;
    this.lock = undefined;
    this.state = 'lost';
    clearInterval(this.keepAliveTimer);
    this.logger.warn(
      `Node ${this.nodeId}: lost the node's lock (${error.message}); claiming no more tasks until this process holds it again`,
    );
    this.retryLater();
  }

  private retryLater(): void {
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => void this.retake(), this.intervalMs);
    this.retryTimer.unref();
  }

  /** A lost lock tried again: held again, taken by another process of the node, or still out of reach. */
  private async retake(): Promise<void> {
    if (this.state !== 'lost') return;
    const nodeId = this.nodeId as string;
    let lock: NodeLock | undefined;
    try {
      const taken = await NodeLock.take(this.db, nodeId, this.options.workerId);
      if ('holder' in taken) {
        // This process's own session, not yet gone (a confirmation that timed out): try again later.
        if (!taken.holder.applicationName || taken.holder.applicationName === nodeLockApplicationName(this.options.workerId)) {
          return this.retryLater();
        }
        return this.takenOver(new NodeIdInUseError(nodeId, taken.holder));
      }
      lock = taken.lock;
      if (this.state !== 'lost') return void (await lock.release());
      await this.hold(lock);
    } catch (error) {
      await lock?.release();
      this.retryLater();
      return;
    }
    this.logger.log(`Node ${nodeId}: holds the node's lock again; claiming goes on`);
    for (const listener of this.regainedListeners) listener();
  }

  private takenOver(error: NodeIdInUseError): void {
    if (this.state !== 'lost') return;
    this.state = 'taken';
    this.logger.error(
      `Node ${this.nodeId}: another process runs as this node now, and took back the tasks this one held: ` +
        `this process's worker stops for good (restart it to run again). ${describeError(error).message}`,
    );
    for (const listener of this.takenListeners) listener();
  }
}
