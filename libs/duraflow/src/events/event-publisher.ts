import { randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { PayloadCoder } from '../codec/payload-coder';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { DuraflowError } from '../domain/errors';
import { EventDelivery, PublishResult } from '../domain/event-options';
import { TaskFactory } from '../execution/task-factory';
import { DuraflowDatabase, SqlExecutor } from '../persistence/duraflow-database';
import { NewTask } from '../persistence/lifecycle/create-tasks';
import { checkPublish } from './publish.checks';
import { EventGroupCloser } from './event-group-closer';
import { EventSubscriptionExplorer } from './event-subscription.explorer';
import { EventSubscriptionRegistry } from './event-subscription.registry';
import { StoredSubscription } from './event-subscription.store';
import { PublishedEventStore } from './published-event.store';
import { groupKeyOf } from './group-key';

export interface PublishOptions {
  /** Record the event (and start its tasks) in the caller's transaction: nothing of it exists unless that commits. */
  manager?: EntityManager;
  /** A second publish of the same name with the same key records nothing and returns the first event. 1 to 255 characters. */
  idempotencyKey?: string;
}

/**
 * `workflows.publish`: the event and one delivery per subscribing workflow, in one transaction
 * (the caller's when given). The subscriptions are the database's (every node's declarations),
 * so a node delivers to workflows it does not run itself. A workflow this node registers gets
 * its task through the task factory (the DTO checks the payload: a refusal is recorded, never
 * thrown); a debounce or batch joins its group (closed later by EventGroupCloser).
 */
@Injectable()
export class EventPublisher {
  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly db: DuraflowDatabase,
    private readonly coder: PayloadCoder,
    private readonly factory: TaskFactory,
    private readonly workflows: WorkflowRegistry,
    private readonly subscriptions: EventSubscriptionRegistry,
    private readonly store: PublishedEventStore,
    private readonly closer: EventGroupCloser,
    private readonly explorer: EventSubscriptionExplorer,
  ) {}

  /**
   * @throws InvalidEventNameError, InvalidPublishError, NotSerializableError: nothing written
   */
  async publish(name: string, payload: unknown, options: PublishOptions = {}): Promise<PublishResult> {
    const checked = checkPublish(name, payload, options ?? {}, this.options);
    await this.explorer.ensureSaved();
    const work = (executor: SqlExecutor) => this.record(executor, name, checked.payloadJson, checked.idempotencyKey);
    const result = options?.manager ? await work(this.db.forManager(options.manager)) : await this.db.transaction(work);
    if (result.deliveries.some((d) => d.groupId !== null)) this.closer.poke();
    return result;
  }

  private async record(executor: SqlExecutor, name: string, payloadJson: string, idempotencyKey: string | null): Promise<PublishResult> {
    const id = randomUUID();
    const payload = JSON.parse(payloadJson) as unknown;
    const stored = JSON.stringify(this.coder.encode(id, 'publish', payload));
    const event = await this.store.insertEvent(executor, { id, name, payloadJson: stored, idempotencyKey });
    if (!event.created) return { eventId: event.id, created: false, deliveries: await this.store.deliveriesOf(executor, event.id) };
    const deliveries: EventDelivery[] = [];
    for (const subscription of event.subscriptions) deliveries.push(await this.deliver(executor, id, name, subscription, payload));
    await this.store.recordDeliveries(executor, id, deliveries);
    return { eventId: id, created: true, deliveries };
  }

  private async deliver(
    executor: SqlExecutor,
    eventId: string,
    name: string,
    subscription: StoredSubscription,
    payload: unknown,
  ): Promise<EventDelivery> {
    const delivery: EventDelivery = { workflowName: subscription.workflowName, taskId: null, groupId: null, refusal: null };
    try {
      if (subscription.mode === 'each') {
        const task = await this.prepareTask(subscription, payload);
        delivery.taskId = (await this.factory.create(task, executor)).task.id;
      } else {
        const key = groupKeyOf(name, subscription, this.subscriptions.get(subscription.workflowName), payload);
        delivery.groupId = await this.store.joinGroup(executor, eventId, subscription.workflowName, key);
      }
    } catch (error) {
      if (!(error instanceof DuraflowError)) throw error;
      delivery.refusal = { code: error.code, message: error.message };
    }
    return delivery;
  }

  private prepareTask(subscription: StoredSubscription, payload: unknown): Promise<NewTask> {
    if (this.workflows.versions(subscription.workflowName).length) {
      return this.factory.prepare(subscription.workflowName, payload, {}, { kind: 'event' });
    }
    return this.factory.prepareForSubscriber(subscription.workflowName, payload, subscription);
  }
}
