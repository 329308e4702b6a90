import { Injectable } from '@nestjs/common';
import { DuraflowDatabase } from '../persistence/duraflow-database';
import { RegisteredSubscription } from './event-subscription.registry';

/** A subscription as `duraflow_event_subscriptions` holds it: what every publish (TypeScript or SQL) delivers by. */
export interface StoredSubscription {
  workflowName: string;
  mode: 'each' | 'debounce' | 'batch';
  keyField: string | null;
  keyInCode: boolean;
  workflowVersion: number | null;
  maxRetries: number;
}

/**
 * For each workflow this node registers, its rows replaced by this node's declaration (others'
 * workflows untouched), in one statement: the rows of a workflow that no longer subscribes go.
 */
const SAVE_SUBSCRIPTIONS = `WITH declared AS (
     SELECT * FROM unnest($2::varchar[], $3::varchar[], $4::int[], $5::int[], $6::varchar[], $7::varchar[], $8::boolean[],
                          $9::int[], $10::int[], $11::int[], $12::int[])
       AS d(event_name, workflow_name, workflow_version, max_retries, mode, key_field, key_in_code, period_ms, max_wait_ms, max_size, timeout_ms)
   ), removed AS (
     DELETE FROM duraflow_event_subscriptions s
     WHERE s.workflow_name = ANY($1::varchar[])
       AND NOT EXISTS (SELECT 1 FROM declared d WHERE d.event_name = s.event_name AND d.workflow_name = s.workflow_name)
   )
   INSERT INTO duraflow_event_subscriptions AS s
     (event_name, workflow_name, workflow_version, max_retries, mode, key_field, key_in_code, period_ms, max_wait_ms, max_size, timeout_ms)
   SELECT * FROM declared
   ON CONFLICT (event_name, workflow_name) DO UPDATE SET
     workflow_version = EXCLUDED.workflow_version, max_retries = EXCLUDED.max_retries, mode = EXCLUDED.mode,
     key_field = EXCLUDED.key_field, key_in_code = EXCLUDED.key_in_code, period_ms = EXCLUDED.period_ms,
     max_wait_ms = EXCLUDED.max_wait_ms, max_size = EXCLUDED.max_size, timeout_ms = EXCLUDED.timeout_ms, updated_at = now()`;

/** The way in to `duraflow_event_subscriptions`. */
@Injectable()
export class EventSubscriptionStore {
  constructor(private readonly db: DuraflowDatabase) {}

  async save(workflowNames: string[], subscriptions: RegisteredSubscription[]): Promise<void> {
    const rows = subscriptions.flatMap((s) => s.events.map((event) => ({ event, s })));
    const column = <T>(pick: (row: (typeof rows)[number]) => T) => rows.map(pick);
    await this.db.query(SAVE_SUBSCRIPTIONS, [
      workflowNames,
      column((r) => r.event),
      column((r) => r.s.workflowName),
      column((r) => r.s.workflowVersion),
      column((r) => r.s.maxRetries),
      column((r) => r.s.mode),
      column((r) => r.s.keyField),
      column((r) => r.s.keyOf !== undefined),
      column((r) => r.s.periodMs),
      column((r) => r.s.maxWaitMs),
      column((r) => r.s.maxSize),
      column((r) => r.s.timeoutMs),
    ]);
  }
}

/** The columns a publish reads of a subscription (the publisher's insert selects them, in workflow-name order as `duraflow_publish`). */
export const SUBSCRIPTION_COLUMNS = 'workflow_name, mode, key_field, key_in_code, workflow_version, max_retries';

export function toStoredSubscription(row: Record<string, any>): StoredSubscription {
  return {
    workflowName: row.workflow_name,
    mode: row.mode,
    keyField: row.key_field,
    keyInCode: row.key_in_code,
    workflowVersion: row.workflow_version,
    maxRetries: row.max_retries,
  };
}
