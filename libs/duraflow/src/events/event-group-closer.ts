import { Inject, Injectable, Logger, OnApplicationBootstrap, BeforeApplicationShutdown } from '@nestjs/common';
import { PayloadCoder } from '../codec/payload-coder';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { DuraflowError } from '../domain/errors';
import { EventRefusal } from '../domain/event-options';
import { TaskFactory } from '../execution/task-factory';
import { DuraflowDatabase, SqlExecutor } from '../persistence/duraflow-database';
import { isReplayBoot } from '../replay/replay-boot';
import { DueGroup, EventGroupStore } from './event-group.store';
import { EventSubscriptionRegistry } from './event-subscription.registry';

/** Groups started per transaction: a batch's input is read whole, so a pass stays short. */
const GROUPS_PER_PASS = 20;

/**
 * Starts the debounces and batches that are due, on every node whose worker runs a debounced or
 * batched workflow (any of them may start any group of the workflows it registers; the database
 * lets one in: EventGroupStore.takeDue).
 *
 * States: stopped -> polling (a pass every `events.groupPollIntervalMs`, or at once when this
 * node's publish joined a group) -> stopped (timer cleared, the pass under way awaited). A pass
 * is one transaction per GROUPS_PER_PASS groups: the group locked, its task created through the
 * task factory (the workflow's DTO checks the input; a refusal is recorded on the group), the
 * group marked started. A process killed at any point leaves the group due for the next pass.
 */
@Injectable()
export class EventGroupCloser implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('Duraflow');
  private running = false;
  private timer: NodeJS.Timeout | undefined;
  private pass: Promise<void> | undefined;
  private failing = false;

  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly db: DuraflowDatabase,
    private readonly coder: PayloadCoder,
    private readonly factory: TaskFactory,
    private readonly subscriptions: EventSubscriptionRegistry,
    private readonly groups: EventGroupStore,
  ) {}

  onApplicationBootstrap(): void {
    if (this.options.worker.enabled && !isReplayBoot()) this.start();
  }

  beforeApplicationShutdown(): Promise<void> {
    return this.stop();
  }

  start(): void {
    if (this.running || !this.subscriptions.grouped().length) return;
    this.running = true;
    this.arm(this.options.events.groupPollIntervalMs);
  }

  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.timer);
    await this.pass;
  }

  /** A group may be due now (a publish of this node filled a batch): a pass soon instead of at the next poll. */
  poke(): void {
    if (this.running && !this.pass) this.arm(0);
  }

  /** Starts every group due now of this node's workflows; how many it started. */
  async closeDue(): Promise<number> {
    const workflows = this.subscriptions.grouped();
    if (!workflows.length) return 0;
    let started = 0;
    for (;;) {
      const count = await this.db.transaction(async (tx) => {
        const due = await this.groups.takeDue(tx, workflows, GROUPS_PER_PASS);
        for (const group of due) await this.startGroup(tx, group);
        return due.length;
      });
      started += count;
      if (count < GROUPS_PER_PASS) return started;
    }
  }

  private arm(delayMs: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.pass = this.closeDue()
        .then(() => {
          if (this.failing) this.logger.log('Event groups: starting due debounces and batches again.');
          this.failing = false;
        })
        .catch((error) => {
          if (!this.failing)
            this.logger.warn(`Event groups: could not start due debounces and batches (${String(error?.message ?? error)}); retrying.`);
          this.failing = true;
        })
        .finally(() => {
          this.pass = undefined;
          if (this.running) this.arm(this.options.events.groupPollIntervalMs);
        });
    }, delayMs);
    this.timer.unref?.();
  }

  private async startGroup(tx: SqlExecutor, group: DueGroup): Promise<void> {
    let taskId: string | null = null;
    let refusal: EventRefusal | null = null;
    try {
      const input = await this.inputOf(tx, group);
      const task = await this.factory.prepare(group.workflowName, input, {}, { kind: 'event' });
      taskId = (await this.factory.create(task, tx)).task.id;
    } catch (error) {
      if (!(error instanceof DuraflowError)) throw error;
      refusal = { code: error.code, message: error.message };
    }
    await this.groups.markStarted(tx, group.id, taskId, refusal);
  }

  /** A debounce's last payload; a batch's events in publish order. */
  private async inputOf(tx: SqlExecutor, group: DueGroup): Promise<unknown> {
    if (group.mode === 'debounce') {
      return this.coder.decode(group.lastEventId, 'publish', await this.groups.eventPayload(tx, group.lastEventId));
    }
    const events = await this.groups.eventsOf(tx, group.id);
    return {
      events: events.map((event) => ({
        id: event.id,
        name: event.name,
        payload: this.coder.decode(event.id, 'publish', event.storedPayload),
        publishedAt: event.publishedAt.toISOString(),
      })),
    };
  }
}
