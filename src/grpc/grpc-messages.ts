import {
  AgentTask,
  BulkTaskFilter,
  DeadLetter,
  EventDelivery,
  RunLogLine,
  StepRun,
  TaskSignal,
  TaskStatus,
  UUID_PATTERN,
} from '@duraflow/nestjs';
import { InvalidJsonError, InvalidRequestError } from '../api/request.errors';

/** TaskStatus as the proto spells it: `rolled_back` <-> `TASK_STATUS_ROLLED_BACK`. */
export function toProtoStatus(status: string): string {
  return `TASK_STATUS_${status.toUpperCase()}`;
}

/** The filter of ListTasks: UNSPECIFIED (or unset) means any status. */
export function fromProtoStatus(status: string | undefined): TaskStatus | undefined {
  if (!status || status === 'TASK_STATUS_UNSPECIFIED') return undefined;
  const value = status.replace(/^TASK_STATUS_/, '').toLowerCase();
  if (!(Object.values(TaskStatus) as string[]).includes(value)) {
    throw new InvalidRequestError(`Unknown status "${status}": use one of the TaskStatus enum's names.`);
  }
  return value as TaskStatus;
}

/** A JSON request field: "" is absent, anything else must parse. */
export function parseJsonField(field: string, value: string | undefined): unknown {
  if (!value) return undefined;
  try {
    return JSON.parse(value);
  } catch (error) {
    throw new InvalidJsonError(`The field "${field}"`, error instanceof Error ? error.message : String(error));
  }
}

/** An id field: a UUID, else INVALID_ARGUMENT naming the field (never a lookup that cannot match). */
export function requireUuid(field: string, value: string): string {
  if (!UUID_PATTERN.test(value)) throw new InvalidRequestError(`${field} must be a UUID.`);
  return value;
}

function json(value: unknown): string {
  return value === null || value === undefined ? '' : JSON.stringify(value);
}

function time(value: Date | string | null | undefined): string {
  if (value === null || value === undefined) return '';
  return value instanceof Date ? value.toISOString() : new Date(value).toISOString();
}

export function toProtoTask(task: AgentTask) {
  return {
    id: task.id,
    workflow_name: task.workflowName,
    status: toProtoStatus(task.status),
    input: json(task.input),
    output: json(task.output),
    error: json(task.error),
    priority: task.priority ?? 0,
    scheduled_at: time(task.scheduledAt),
    started_at: time(task.startedAt),
    completed_at: time(task.completedAt),
    heartbeat_at: time(task.heartbeatAt),
    worker_id: task.workerId ?? '',
    retry_count: task.retryCount ?? 0,
    max_retries: task.maxRetries ?? 0,
    created_at: time(task.createdAt),
    updated_at: time(task.updatedAt),
    idempotency_key: task.idempotencyKey ?? '',
    rollback_reason: task.rollbackReason ?? '',
    workflow_version: task.workflowVersion ?? 0,
    held_at: time(task.heldAt),
    parent_task_id: task.parentTaskId ?? '',
    parent_step_key: task.parentStepKey ?? '',
    forked_from_task_id: task.forkedFrom?.taskId ?? task.forkedFromTaskId ?? '',
    forked_from_step: task.forkedFrom?.fromStep ?? task.forkedFromStep ?? '',
    history: JSON.stringify(task.history ?? []),
    copied_steps: (task as { copiedSteps?: number }).copiedSteps ?? 0,
    tags: task.tags ?? {},
  };
}

export function toProtoStep(step: StepRun) {
  return {
    id: step.id,
    task_id: step.taskId,
    step_key: step.stepKey,
    status: step.status,
    input: json(step.input),
    output: json(step.output),
    error: json(step.error),
    compensation_fn: step.compensationFn ?? '',
    compensated_at: time(step.compensatedAt),
    started_at: time(step.startedAt),
    completed_at: time(step.completedAt),
    created_at: time(step.createdAt),
    attempt: step.attempt ?? 0,
  };
}

export function toProtoSignal(signal: TaskSignal) {
  return {
    id: signal.id,
    name: signal.name,
    payload: json(signal.payload),
    payload_bytes: signal.payloadBytes,
    payload_omitted: signal.payloadOmitted,
    payload_preview: signal.payloadPreview ?? '',
    created_at: time(signal.createdAt),
    consumed_at: time(signal.consumedAt),
    consumed_by_step: signal.consumedByStep ?? '',
  };
}

export function toProtoLogLine(line: RunLogLine) {
  return {
    seq: line.seq,
    level: line.level,
    message: line.message,
    metadata: json(line.metadata),
    step_key: line.stepKey ?? '',
    attempt: line.attempt ?? 0,
    at: time(line.at),
  };
}

export function toProtoDeadLetter(deadLetter: DeadLetter) {
  return {
    id: deadLetter.id,
    task_id: deadLetter.taskId,
    step_id: deadLetter.stepId,
    error: json(deadLetter.error),
    retry_count: deadLetter.retryCount ?? 0,
    created_at: time(deadLetter.createdAt),
  };
}

/** TaskFilter of the bulk RPCs, as the proto carries it ("" and unset mean no bound). */
export interface ProtoTaskFilter {
  workflow_name?: string;
  status?: string[];
  version?: number;
  created_before?: string;
  created_after?: string;
  all?: boolean;
  tags?: Record<string, string>;
}

/** The library's bulk filter from the proto's: each status checked as ListTasks checks its one. */
export function fromProtoFilter(filter: ProtoTaskFilter | null | undefined): BulkTaskFilter {
  const statuses = (filter?.status ?? []).map((status) => fromProtoStatus(status)).filter((status) => status !== undefined);
  return {
    workflow: filter?.workflow_name || undefined,
    status: statuses.length ? statuses : undefined,
    version: filter?.version ?? undefined,
    createdBefore: filter?.created_before || undefined,
    createdAfter: filter?.created_after || undefined,
    all: filter?.all || undefined,
    tags: protoTags(filter?.tags),
  };
}

/** A proto map of tags: empty (the proto's default) means none. */
export function protoTags(tags: Record<string, string> | null | undefined): Record<string, string> | undefined {
  return tags && Object.keys(tags).length ? tags : undefined;
}

/** What a publish did for one subscribing workflow, as PublishEventResponse carries it ("" for none). */
export function toProtoDelivery(delivery: EventDelivery) {
  return {
    workflow_name: delivery.workflowName,
    task_id: delivery.taskId ?? '',
    group_id: delivery.groupId ?? '',
    refusal_code: delivery.refusal?.code ?? '',
    refusal_message: delivery.refusal?.message ?? '',
  };
}
