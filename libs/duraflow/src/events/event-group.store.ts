import { Injectable } from '@nestjs/common';
import { EventRefusal } from '../domain/event-options';
import { SqlExecutor } from '../persistence/duraflow-database';

/** A debounce or batch due, locked by the closer's transaction. */
export interface DueGroup {
  id: string;
  workflowName: string;
  mode: 'debounce' | 'batch';
  lastEventId: string;
}

/** An event of a batch, as the batch's input lists it (payload as stored: the closer decodes it). */
export interface GroupEvent {
  id: string;
  name: string;
  storedPayload: unknown;
  publishedAt: Date;
}

/**
 * The closer's statements on `duraflow_event_groups`. Exactly one start per group across nodes:
 * the groups due are locked FOR UPDATE SKIP LOCKED (a group a publisher is joining, or another
 * closer is starting, is skipped), and a group is started in the transaction that creates its task.
 */
@Injectable()
export class EventGroupStore {
  /** Due groups of `workflows` (a full batch is due at once), oldest due first; idx_duraflow_event_groups_due. */
  async takeDue(tx: SqlExecutor, workflows: string[], limit: number): Promise<DueGroup[]> {
    const { rows } = await tx.query(
      `SELECT id, workflow_name, mode, last_event_id FROM duraflow_event_groups
       WHERE started_at IS NULL AND due_at <= duraflow_now() AND workflow_name = ANY($1::varchar[])
       ORDER BY due_at LIMIT $2 FOR UPDATE SKIP LOCKED`,
      [workflows, limit],
      'duraflow_take_due_groups',
    );
    return rows.map((row) => ({ id: row.id, workflowName: row.workflow_name, mode: row.mode, lastEventId: row.last_event_id }));
  }

  /** The events of a group in the order they were published. */
  async eventsOf(tx: SqlExecutor, groupId: string): Promise<GroupEvent[]> {
    const { rows } = await tx.query(
      `SELECT e.id, e.name, e.payload, e.created_at FROM duraflow_event_deliveries d
       JOIN duraflow_published_events e ON e.id = d.event_id
       WHERE d.group_id = $1 ORDER BY e.created_at, e.id`,
      [groupId],
      'duraflow_group_events',
    );
    return rows.map((row) => ({ id: row.id, name: row.name, storedPayload: row.payload, publishedAt: row.created_at }));
  }

  async eventPayload(tx: SqlExecutor, eventId: string): Promise<unknown> {
    const { rows } = await tx.query(`SELECT payload FROM duraflow_published_events WHERE id = $1`, [eventId]);
    return rows[0]?.payload ?? null;
  }

  /** The group started (its task, or the refusal of its input): sealed, never taken again. */
  async markStarted(tx: SqlExecutor, groupId: string, taskId: string | null, refusal: EventRefusal | null): Promise<void> {
    await tx.query(
      `UPDATE duraflow_event_groups SET sealed_at = coalesce(sealed_at, duraflow_now()), started_at = duraflow_now(), task_id = $2, refusal = $3::jsonb
       WHERE id = $1 AND started_at IS NULL`,
      [groupId, taskId, refusal && JSON.stringify(refusal)],
      'duraflow_mark_group_started',
    );
  }
}
