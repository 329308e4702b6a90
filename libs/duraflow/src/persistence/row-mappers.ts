import { AgentTask, TaskError, TaskHistoryEntry } from '../domain/entities/agent-task.entity';
import { DeadLetter } from '../domain/entities/dead-letter.entity';
import { StepRun } from '../domain/entities/step-run.entity';

/** A column list each prefixed with `alias.`, for statements that join. */
function qualified(columns: string, alias: string): string {
  return columns.replace(/(^|,\s*)(\w+)/g, `$1${alias}.$2`);
}

/** The columns a task is read with (never the fencing token). */
export const TASK_COLUMNS = `id, workflow_name, status, input, output, error, priority, scheduled_at, started_at,
  completed_at, heartbeat_at, worker_id, retry_count, max_retries, created_at, updated_at, deleted_at, idempotency_key, rollback_reason,
  workflow_version, held_at, concurrency_key, parent_task_id, parent_step_key, history, forked_from, forked_from_step, tags`;

/** TASK_COLUMNS for statements that join agent_tasks as `t`: `t.id, t.workflow_name, ...`. */
export const TASK_COLUMNS_OF_T = qualified(TASK_COLUMNS, 't');

export const STEP_COLUMNS = `id, task_id, step_key, status, input, output, error, compensation_fn, compensated_at,
  started_at, completed_at, created_at, attempt, completion_seq, kind, wake_at`;

export const DEAD_LETTER_COLUMNS = `id, task_id, step_id, error, retry_count, created_at`;

/** DEAD_LETTER_COLUMNS for statements that join dead_letter_queue as `d`. */
export const DEAD_LETTER_COLUMNS_OF_D = qualified(DEAD_LETTER_COLUMNS, 'd');

export function toAgentTask(row: Record<string, any>): AgentTask {
  const task = new AgentTask();
  task.id = row.id;
  task.workflowName = row.workflow_name;
  task.status = row.status;
  task.input = row.input;
  task.output = row.output;
  task.error = row.error as TaskError | null;
  task.priority = row.priority;
  task.scheduledAt = row.scheduled_at;
  task.startedAt = row.started_at;
  task.completedAt = row.completed_at;
  task.heartbeatAt = row.heartbeat_at;
  task.workerId = row.worker_id;
  task.retryCount = row.retry_count;
  task.maxRetries = row.max_retries;
  task.createdAt = row.created_at;
  task.updatedAt = row.updated_at;
  task.deletedAt = row.deleted_at;
  task.idempotencyKey = row.idempotency_key;
  task.rollbackReason = row.rollback_reason ?? null;
  task.workflowVersion = row.workflow_version ?? null;
  task.heldAt = row.held_at ?? null;
  task.concurrencyKey = row.concurrency_key ?? null;
  task.parentTaskId = row.parent_task_id ?? null;
  task.parentStepKey = row.parent_step_key ?? null;
  task.history = (row.history as TaskHistoryEntry[] | null) ?? [];
  task.forkedFromTaskId = row.forked_from ?? null;
  task.forkedFromStep = row.forked_from_step ?? null;
  task.forkedFrom = row.forked_from ? { taskId: row.forked_from, fromStep: row.forked_from_step } : null;
  task.tags = (row.tags as Record<string, string> | null) ?? {};
  return task;
}

export function toStepRun(row: Record<string, any>): StepRun {
  const step = new StepRun();
  step.id = row.id;
  step.taskId = row.task_id;
  step.stepKey = row.step_key;
  step.status = row.status;
  step.input = row.input;
  step.output = row.output;
  step.error = row.error;
  step.compensationFn = row.compensation_fn;
  step.compensatedAt = row.compensated_at;
  step.startedAt = row.started_at;
  step.completedAt = row.completed_at;
  step.createdAt = row.created_at;
  step.attempt = row.attempt;
  step.completionSeq = row.completion_seq;
  step.kind = row.kind ?? null;
  step.wakeAt = row.wake_at ?? null;
  return step;
}

export function toDeadLetter(row: Record<string, any>): DeadLetter {
  return Object.assign(new DeadLetter(), {
    id: row.id,
    taskId: row.task_id,
    stepId: row.step_id,
    error: row.error,
    retryCount: row.retry_count,
    createdAt: row.created_at,
  });
}
