import { AgentTask, TaskError } from '../entities/agent-task.entity';
import { StepRun } from '../entities/step-run.entity';

/** The columns a task is read with (never the fencing token). */
export const TASK_COLUMNS = `id, workflow_name, status, input, output, error, priority, scheduled_at, started_at,
  completed_at, heartbeat_at, worker_id, retry_count, max_retries, created_at, updated_at, deleted_at, idempotency_key, rollback_reason`;

/** TASK_COLUMNS for statements that join agent_tasks as `t`: `t.id, t.workflow_name, ...`. */
export const TASK_COLUMNS_OF_T = TASK_COLUMNS.replace(/(^|,\s*)(\w+)/g, '$1t.$2');

export const STEP_COLUMNS = `id, task_id, step_key, status, input, output, error, compensation_fn, compensated_at,
  started_at, completed_at, created_at, attempt, completion_seq`;

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
  return step;
}
