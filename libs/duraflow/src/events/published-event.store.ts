import { Injectable } from '@nestjs/common';
import { EventDelivery, EventRefusal } from '../domain/event-options';
import { SqlExecutor } from '../persistence/duraflow-database';
import { StoredSubscription, SUBSCRIPTION_COLUMNS, toStoredSubscription } from './event-subscription.store';

/** An event as the publisher inserts it: its payload already through the PayloadCoder. */
export interface NewEvent {
  id: string;
  name: string;
  payloadJson: string | null;
  idempotencyKey: string | null;
}

/**
 * The publisher's statements on `duraflow_published_events` and `duraflow_event_deliveries`, each
 * on the publish's executor (the caller's transaction or one of the library's). The group rule
 * itself is SQL's `duraflow_join_event_group` (migration 4000), shared with `duraflow_publish`.
 */
@Injectable()
export class PublishedEventStore {
  /**
   * The event's id and whether this call recorded it (false: an earlier publish holds the name and
   * key), with the subscriptions of its name when it did: one statement (a row per subscription,
   * or one of NULLs when none; no row when nothing was inserted).
   */
  async insertEvent(
    executor: SqlExecutor,
    event: NewEvent,
  ): Promise<{ id: string; created: boolean; subscriptions: StoredSubscription[] }> {
    const inserted = await executor.query(
      `WITH inserted AS (
         INSERT INTO duraflow_published_events (id, name, payload, idempotency_key) VALUES ($1, $2, $3::jsonb, $4)
         ON CONFLICT (name, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING RETURNING id
       )
       SELECT s.${SUBSCRIPTION_COLUMNS.split(', ').join(', s.')}
       FROM inserted LEFT JOIN duraflow_event_subscriptions s ON s.event_name = $2 ORDER BY s.workflow_name`,
      [event.id, event.name, event.payloadJson, event.idempotencyKey],
      'duraflow_insert_event',
    );
    if (inserted.rowCount) {
      const subscriptions = inserted.rows.filter((row) => row.workflow_name !== null).map(toStoredSubscription);
      return { id: event.id, created: true, subscriptions };
    }
    // ON CONFLICT waited for the holder of the key to commit, so its row is visible now.
    const { rows } = await executor.query(`SELECT id FROM duraflow_published_events WHERE name = $1 AND idempotency_key = $2`, [
      event.name,
      event.idempotencyKey,
    ]);
    return { id: rows[0].id, created: false, subscriptions: [] };
  }

  /** The deliveries of one event, in one statement. */
  async recordDeliveries(executor: SqlExecutor, eventId: string, deliveries: EventDelivery[]): Promise<void> {
    if (!deliveries.length) return;
    await executor.query(
      `INSERT INTO duraflow_event_deliveries (event_id, workflow_name, task_id, group_id, refusal)
       SELECT $1, * FROM unnest($2::varchar[], $3::uuid[], $4::uuid[], $5::jsonb[])`,
      [
        eventId,
        deliveries.map((d) => d.workflowName),
        deliveries.map((d) => d.taskId),
        deliveries.map((d) => d.groupId),
        deliveries.map((d) => d.refusal && JSON.stringify(d.refusal)),
      ],
      'duraflow_record_deliveries',
    );
  }

  /** The event joins the open debounce or batch of (workflow, key), or opens one: the group's id. */
  async joinGroup(executor: SqlExecutor, eventId: string, workflowName: string, key: string): Promise<string> {
    const { rows } = await executor.query(
      `SELECT duraflow_join_event_group($1, $2, $3) AS id`,
      [eventId, workflowName, key],
      'duraflow_join_group',
    );
    return rows[0].id;
  }

  /**
   * Deletes up to `batch` published events older than `retention` (an interval's text) with their
   * deliveries, never one a group still to start holds, and as many started groups as old; how
   * many events it deleted. Picked FOR UPDATE SKIP LOCKED: two nodes sweeping never wait.
   * Ages are counted on the engine's clock (`duraflow_now()`, the testing kit's virtual one).
   */
  async deleteExpired(executor: SqlExecutor, retention: string, batch: number): Promise<number> {
    const { rows } = await executor.query(
      `WITH expired AS (
         SELECT e.id FROM duraflow_published_events e
         WHERE e.created_at < duraflow_now() - $1::interval
           AND NOT EXISTS (SELECT 1 FROM duraflow_event_deliveries d JOIN duraflow_event_groups g ON g.id = d.group_id
                           WHERE d.event_id = e.id AND g.started_at IS NULL)
         ORDER BY e.created_at LIMIT $2 FOR UPDATE SKIP LOCKED
       ), events AS (
         DELETE FROM duraflow_published_events WHERE id IN (SELECT id FROM expired) RETURNING id
       ), groups AS (
         DELETE FROM duraflow_event_groups WHERE id IN (
           SELECT id FROM duraflow_event_groups WHERE started_at < duraflow_now() - $1::interval LIMIT $2 FOR UPDATE SKIP LOCKED)
       )
       SELECT count(*)::int AS events FROM events`,
      [retention, batch],
      'duraflow_delete_expired_events',
    );
    return rows[0].events;
  }

  async deliveriesOf(executor: SqlExecutor, eventId: string): Promise<EventDelivery[]> {
    const { rows } = await executor.query(
      `SELECT d.workflow_name, coalesce(d.task_id, g.task_id) AS task_id, d.group_id, coalesce(d.refusal, g.refusal) AS refusal
       FROM duraflow_event_deliveries d LEFT JOIN duraflow_event_groups g ON g.id = d.group_id
       WHERE d.event_id = $1 ORDER BY d.workflow_name`,
      [eventId],
    );
    return rows.map(toDelivery);
  }
}

export function toDelivery(row: {
  workflow_name: string;
  task_id: string | null;
  group_id: string | null;
  refusal: unknown;
}): EventDelivery {
  return {
    workflowName: row.workflow_name,
    taskId: row.task_id,
    groupId: row.group_id,
    refusal: (row.refusal as EventRefusal | null) ?? null,
  };
}
