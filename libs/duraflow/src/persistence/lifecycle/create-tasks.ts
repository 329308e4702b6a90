import { randomUUID } from 'node:crypto';
import { TASK_SUBMITTED_CHANNEL } from '../../domain/duraflow.constants';
import { AgentTask } from '../../domain/entities/agent-task.entity';
import { SqlExecutor } from '../duraflow-database';
import { TASK_COLUMNS, toAgentTask } from '../row-mappers';

/** A task to create, as the task factory (execution/task-factory.ts) prepared it: every value checked. */
export interface NewTask {
  /** The id to give the task (a codec binds the input to it before the INSERT); absent: the database makes one. */
  id?: string;
  workflowName: string;
  /** Already serialized JSON. */
  inputJson: string;
  priority: number;
  scheduledAt: Date | null;
  maxRetries: number;
  idempotencyKey: string | null;
  /** The submitter's W3C trace context as JSON (OpenTelemetry), or null. */
  traceContextJson: string | null;
  /** The workflow's declared version; null for a workflow that declares none (version 1). */
  workflowVersion: number | null;
  /** Flow control's key: null for a workflow without limits. */
  concurrencyKey: string | null;
  /** A child's parent and the parent's step that started it; null for a task of its own. */
  parentTaskId: string | null;
  parentStepKey: string | null;
  /** A fork's original task and the step it runs anew from (fork-task.ts); absent for any other task. */
  forkedFrom?: { taskId: string; fromStep: string } | null;
  /** The task's tags, checked; null for a child that takes its parent's (the parent's row is read in the INSERT). */
  tags: Record<string, string> | null;
}

/** What creating a task found: the task, whether this call created it, and whether an existing one has the same input. */
export interface CreatedTask {
  task: AgentTask;
  created: boolean;
  sameInput: boolean;
}

/**
 * The create move: one INSERT, or nothing when a task already holds the idempotency key (the
 * unique partial index arbitrates concurrent creates: a second one waits for the first to
 * commit). The NOTIFY is sent by PostgreSQL on commit, so a worker never wakes for a rolled-back
 * task, and only for a task runnable now.
 */
const INSERT_TASK = `WITH inserted AS (
     INSERT INTO agent_tasks (id, workflow_name, input, priority, scheduled_at, max_retries, idempotency_key, trace_context, workflow_version,
                              concurrency_key, parent_task_id, parent_step_key, forked_from, forked_from_step, tags)
     VALUES (coalesce($15::uuid, gen_random_uuid()), $1, $2::jsonb, $3, $4, $5, $6, $7::jsonb, $8, $9, $10, $11, $12, $13,
             coalesce($14::jsonb, (SELECT p.tags FROM agent_tasks p WHERE p.id = $10::uuid), '{}'::jsonb))
     ON CONFLICT (workflow_name, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
     RETURNING ${TASK_COLUMNS}
   )
   SELECT inserted.*,
          CASE WHEN scheduled_at IS NULL OR scheduled_at <= duraflow_now() THEN pg_notify('${TASK_SUBMITTED_CHANNEL}', workflow_name) END AS notified
   FROM inserted`;

/** The task holding an idempotency key, and whether its input is the same as jsonb (key order and number spelling aside). */
const FIND_BY_IDEMPOTENCY_KEY = `SELECT ${TASK_COLUMNS}, input = $3::jsonb AS same_input
   FROM agent_tasks WHERE workflow_name = $1 AND idempotency_key = $2`;

/**
 * Creates a task on `executor` (the pool, the caller's transaction, or a transaction of the
 * library's), or finds the one that already holds its idempotency key.
 */
export async function createTask(executor: SqlExecutor, task: NewTask): Promise<CreatedTask> {
  const values = [
    task.workflowName,
    task.inputJson,
    task.priority,
    task.scheduledAt,
    task.maxRetries,
    task.idempotencyKey,
    task.traceContextJson,
    task.workflowVersion,
    task.concurrencyKey,
    task.parentTaskId,
    task.parentStepKey,
    task.forkedFrom?.taskId ?? null,
    task.forkedFrom?.fromStep ?? null,
    task.tags === null ? null : JSON.stringify(task.tags),
    task.id ?? null,
  ];
  // A task that held the key and was deleted between the two statements: insert again.
  for (let attempt = 0; attempt < 3; attempt++) {
    const inserted = await executor.query(INSERT_TASK, values, 'duraflow_insert_task');
    if (inserted.rows.length) return { task: toAgentTask(inserted.rows[0]), created: true, sameInput: true };
    const existing = await executor.query(FIND_BY_IDEMPOTENCY_KEY, [task.workflowName, task.idempotencyKey, task.inputJson]);
    if (existing.rows.length) {
      return { task: toAgentTask(existing.rows[0]), created: false, sameInput: existing.rows[0].same_input === true };
    }
  }
  throw new Error(`Could not insert or find the task with idempotency key "${task.idempotencyKey}"; try again.`);
}

/**
 * The create move for tasks of concurrent callers (group commit: execution/task-factory.ts), in
 * one statement and one commit, with one NOTIFY per workflow of them runnable now: each row as
 * INSERT_TASK writes it (the same columns and defaults; a child with no tags takes its parent's).
 * Every task is given its id here when it has none, so the rows returned are matched to their
 * task; a task whose idempotency key another task holds (or another task of the same batch took
 * first) comes back null, and its caller goes through `createTask` (which finds the holder).
 */
export async function createTasksTogether(executor: SqlExecutor, tasks: NewTask[]): Promise<Array<CreatedTask | null>> {
  const ids = tasks.map((task) => task.id ?? randomUUID());
  const { rows } = await executor.query(
    `WITH inserted AS (
       INSERT INTO agent_tasks (id, workflow_name, input, priority, scheduled_at, max_retries, idempotency_key, trace_context, workflow_version,
                                concurrency_key, parent_task_id, parent_step_key, forked_from, forked_from_step, tags)
       SELECT r.id, r.workflow_name, r.input, r.priority, r.scheduled_at, r.max_retries, r.idempotency_key, r.trace_context, r.workflow_version,
              r.concurrency_key, r.parent_task_id, r.parent_step_key, r.forked_from, r.forked_from_step,
              coalesce(r.tags, (SELECT p.tags FROM agent_tasks p WHERE p.id = r.parent_task_id), '{}'::jsonb)
       FROM unnest($1::uuid[], $2::varchar[], $3::jsonb[], $4::int[], $5::timestamptz[], $6::int[], $7::varchar[], $8::jsonb[], $9::int[],
                   $10::varchar[], $11::uuid[], $12::varchar[], $13::uuid[], $14::varchar[], $15::jsonb[])
            WITH ORDINALITY AS r(id, workflow_name, input, priority, scheduled_at, max_retries, idempotency_key, trace_context, workflow_version,
                                 concurrency_key, parent_task_id, parent_step_key, forked_from, forked_from_step, tags, n)
       ORDER BY r.n
       ON CONFLICT (workflow_name, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
       RETURNING ${TASK_COLUMNS}
     ), notified AS (
       SELECT pg_notify('${TASK_SUBMITTED_CHANNEL}', w.workflow_name)
       FROM (SELECT DISTINCT workflow_name FROM inserted WHERE scheduled_at IS NULL OR scheduled_at <= duraflow_now()) AS w
     )
     SELECT inserted.* FROM inserted, (SELECT count(*) FROM notified) AS sent`,
    [
      ids,
      tasks.map((task) => task.workflowName),
      tasks.map((task) => task.inputJson),
      tasks.map((task) => task.priority),
      tasks.map((task) => task.scheduledAt),
      tasks.map((task) => task.maxRetries),
      tasks.map((task) => task.idempotencyKey),
      tasks.map((task) => task.traceContextJson),
      tasks.map((task) => task.workflowVersion),
      tasks.map((task) => task.concurrencyKey),
      tasks.map((task) => task.parentTaskId),
      tasks.map((task) => task.parentStepKey),
      tasks.map((task) => task.forkedFrom?.taskId ?? null),
      tasks.map((task) => task.forkedFrom?.fromStep ?? null),
      tasks.map((task) => (task.tags === null ? null : JSON.stringify(task.tags))),
    ],
    'duraflow_insert_tasks_together',
  );
  const byId = new Map(rows.map((row) => [row.id as string, row]));
  return ids.map((id) => {
    const row = byId.get(id);
    return row ? { task: toAgentTask(row), created: true, sameInput: true } : null;
  });
}

/** Many tasks of one workflow, all with the same options and no idempotency key (submitMany). */
export interface NewTasks extends Omit<
  NewTask,
  'inputJson' | 'concurrencyKey' | 'idempotencyKey' | 'parentTaskId' | 'parentStepKey' | 'forkedFrom' | 'tags'
> {
  tags: Record<string, string>;
  inputsJson: string[];
  /** The ids to give the tasks, one per input (a codec binds each input to its id); absent: the database makes them. */
  ids?: string[];
  /** One per input (flow control's key), or none for a workflow without limits. */
  concurrencyKeys: Array<string | null> | null;
}

/**
 * Creates many tasks of one workflow in one statement, with one NOTIFY for all of them (a
 * NOTIFY serializes commits across the server, so one per batch rather than one per task).
 */
export async function createTasks(executor: SqlExecutor, batch: NewTasks): Promise<AgentTask[]> {
  const { rows } = await executor.query(
    `WITH inserted AS (
       INSERT INTO agent_tasks (id, workflow_name, input, priority, scheduled_at, max_retries, trace_context, workflow_version, concurrency_key, tags)
       SELECT coalesce(($10::uuid[])[n], gen_random_uuid()), $1, input, $3, $4, $5, $6::jsonb, $7, ($8::varchar[])[n], $9::jsonb
       FROM unnest($2::jsonb[]) WITH ORDINALITY AS i(input, n) ORDER BY n
       RETURNING ${TASK_COLUMNS}
     ), notified AS (
       SELECT pg_notify('${TASK_SUBMITTED_CHANNEL}', $1) WHERE $4::timestamptz IS NULL OR $4::timestamptz <= duraflow_now()
     )
     SELECT inserted.* FROM inserted, (SELECT count(*) FROM notified) AS sent`,
    [
      batch.workflowName,
      batch.inputsJson,
      batch.priority,
      batch.scheduledAt,
      batch.maxRetries,
      batch.traceContextJson,
      batch.workflowVersion,
      batch.concurrencyKeys ?? [],
      JSON.stringify(batch.tags),
      batch.ids ?? [],
    ],
    'duraflow_insert_tasks',
  );
  return rows.map(toAgentTask);
}
