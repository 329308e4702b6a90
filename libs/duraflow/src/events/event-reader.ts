import { Injectable } from '@nestjs/common';
import { PayloadCoder } from '../codec/payload-coder';
import { DuraflowError } from '../domain/errors';
import { OpenEventGroup, PublishedEventInfo } from '../domain/event-options';
import { DuraflowDatabase } from '../persistence/duraflow-database';
import { toDelivery } from './published-event.store';

export interface ListEventsOptions {
  /** Only events of this name. */
  name?: string;
  /** At most this many, newest first (1 to 1000). Default 50. */
  limit?: number;
}

/** What shows in place of a payload no configured key opens. */
const UNREADABLE = '[cannot decrypt]';

/** The recent events with what each started, and the debounces and batches not started yet (the dashboard's Events page). */
@Injectable()
export class EventReader {
  constructor(
    private readonly db: DuraflowDatabase,
    private readonly coder: PayloadCoder,
  ) {}

  async listEvents(options: ListEventsOptions = {}): Promise<PublishedEventInfo[]> {
    const limit = Math.min(Math.max(Math.trunc(Number(options.limit ?? 50)) || 50, 1), 1000);
    const { rows } = await this.db.query(
      `SELECT e.id, e.name, e.payload, e.idempotency_key, e.created_at,
              coalesce((SELECT jsonb_agg(jsonb_build_object('workflow_name', d.workflow_name, 'task_id', coalesce(d.task_id, g.task_id),
                                                            'group_id', d.group_id, 'refusal', coalesce(d.refusal, g.refusal))
                                         ORDER BY d.workflow_name)
                        FROM duraflow_event_deliveries d LEFT JOIN duraflow_event_groups g ON g.id = d.group_id
                        WHERE d.event_id = e.id), '[]'::jsonb) AS deliveries
       FROM duraflow_published_events e
       WHERE $1::varchar IS NULL OR e.name = $1
       ORDER BY e.created_at DESC, e.id DESC LIMIT $2`,
      [options.name ?? null, limit],
    );
    return rows.map((row) => ({
      id: row.id,
      name: row.name,
      payload: this.readable(row.id, row.payload),
      idempotencyKey: row.idempotency_key,
      publishedAt: row.created_at,
      deliveries: (row.deliveries as Array<Parameters<typeof toDelivery>[0]>).map(toDelivery),
    }));
  }

  /** The debounces and batches whose task has not started, soonest due first. */
  async listOpenGroups(limit = 100): Promise<OpenEventGroup[]> {
    const { rows } = await this.db.query(
      `SELECT id, workflow_name, mode, group_key, event_count, opened_at, due_at, sealed_at IS NOT NULL AS sealed
       FROM duraflow_event_groups WHERE started_at IS NULL ORDER BY due_at LIMIT $1`,
      [limit],
    );
    return rows.map((row) => ({
      id: row.id,
      workflowName: row.workflow_name,
      mode: row.mode,
      key: row.group_key,
      eventCount: row.event_count,
      openedAt: row.opened_at,
      dueAt: row.due_at,
      sealed: row.sealed,
    }));
  }

  private readable(eventId: string, stored: unknown): unknown {
    try {
      return this.coder.decode(eventId, 'publish', stored);
    } catch (error) {
      if (error instanceof DuraflowError) return UNREADABLE;
      throw error;
    }
  }
}
