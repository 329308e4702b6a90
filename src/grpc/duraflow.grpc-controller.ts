import { Controller, UseFilters } from '@nestjs/common';
import { GrpcMethod } from '@nestjs/microservices';
import { Metadata, ServerUnaryCall } from '@grpc/grpc-js';
import { BulkResult, SagaService, TaskNotFoundError, WorkerService, WorkflowService } from '@duraflow/nestjs';
import { GrpcExceptionFilter } from './grpc-exception.filter';
import {
  fromProtoFilter,
  fromProtoStatus,
  parseJsonField,
  ProtoTaskFilter,
  requireUuid,
  toProtoDeadLetter,
  toProtoDelivery,
  toProtoLogLine,
  toProtoSignal,
  toProtoStep,
  protoTags,
  toProtoTask,
} from './grpc-messages';

interface SubmitTaskRequest {
  workflow_name: string;
  input: string;
  priority: number;
  scheduled_at: string;
  max_retries?: number;
  idempotency_key: string;
  version?: number;
  tags?: Record<string, string>;
}

interface ListRequest {
  limit: number;
  cursor: string;
}

interface BulkTasksRequest {
  filter: ProtoTaskFilter | null;
  limit: number;
  dry_run: boolean;
}

/** A bulk RPC's limit (0: none) and dry run. */
function bulkOptions(request: BulkTasksRequest): { limit?: number; dryRun: boolean } {
  return { limit: request.limit || undefined, dryRun: request.dry_run };
}

/** `duraflow.v1.Duraflow` (src/grpc/duraflow.proto) over WorkflowService and SagaService. */
@Controller()
@UseFilters(GrpcExceptionFilter)
export class DuraflowGrpcController {
  constructor(
    private readonly workflows: WorkflowService,
    private readonly saga: SagaService,
    private readonly worker: WorkerService,
  ) {}

  /** The task; the response metadata `created` says whether this call made it (`true`) or found it by its idempotency key (`false`). */
  @GrpcMethod('Duraflow', 'SubmitTask')
  async submitTask(request: SubmitTaskRequest, _metadata: Metadata, call: ServerUnaryCall<unknown, unknown>) {
    const { task, created } = await this.workflows.submitWithResult(request.workflow_name, parseJsonField('input', request.input), {
      priority: request.priority || undefined,
      scheduledAt: request.scheduled_at || undefined,
      maxRetries: request.max_retries ?? undefined,
      idempotencyKey: request.idempotency_key || undefined,
      version: request.version ?? undefined,
      tags: protoTags(request.tags),
    });
    const metadata = new Metadata();
    metadata.set('created', String(created));
    call.sendMetadata(metadata);
    return toProtoTask(task);
  }

  @GrpcMethod('Duraflow', 'GetTask')
  async getTask(request: { id: string }) {
    const task = await this.workflows.get(requireUuid('id', request.id));
    if (!task) throw new TaskNotFoundError(request.id);
    const children = await this.workflows.getChildren(task.id);
    return { ...toProtoTask(task), child_task_ids: children.map((child) => child.id) };
  }

  @GrpcMethod('Duraflow', 'GetSteps')
  async getSteps(request: { task_id: string }) {
    if (!(await this.workflows.get(requireUuid('task_id', request.task_id)))) throw new TaskNotFoundError(request.task_id);
    const steps = await this.workflows.getSteps(request.task_id);
    return { steps: steps.map(toProtoStep) };
  }

  @GrpcMethod('Duraflow', 'ListTasks')
  async listTasks(request: ListRequest & { status: string; workflow_name: string; tags?: Record<string, string> }) {
    const page = await this.workflows.list({
      status: fromProtoStatus(request.status),
      workflowName: request.workflow_name || undefined,
      tags: protoTags(request.tags),
      limit: request.limit || undefined,
      cursor: request.cursor || undefined,
    });
    return { tasks: page.items.map(toProtoTask), next_cursor: page.nextCursor ?? '' };
  }

  @GrpcMethod('Duraflow', 'CancelTask')
  async cancelTask(request: { id: string; compensate: boolean }) {
    return toProtoTask(await this.workflows.cancel(requireUuid('id', request.id), { compensate: request.compensate }));
  }

  @GrpcMethod('Duraflow', 'ResumeTask')
  async resumeTask(request: { id: string }) {
    return toProtoTask(await this.workflows.resume(requireUuid('id', request.id)));
  }

  @GrpcMethod('Duraflow', 'SignalTask')
  async signalTask(request: { task_id: string; name: string; payload: string }) {
    const receipt = await this.workflows.signal(
      requireUuid('task_id', request.task_id),
      request.name,
      parseJsonField('payload', request.payload),
    );
    return { signal_id: receipt.signalId, woke_task: receipt.wokeTask };
  }

  @GrpcMethod('Duraflow', 'ListSignals')
  async listSignals(request: ListRequest & { task_id: string; max_payload_bytes?: number }) {
    if (!(await this.workflows.get(requireUuid('task_id', request.task_id)))) throw new TaskNotFoundError(request.task_id);
    const page = await this.workflows.listSignals(request.task_id, {
      limit: request.limit || undefined,
      after: request.cursor || undefined,
      maxPayloadBytes: request.max_payload_bytes ?? undefined,
    });
    return { signals: page.items.map(toProtoSignal), next_cursor: page.nextCursor ?? '' };
  }

  @GrpcMethod('Duraflow', 'PublishEvent')
  async publishEvent(request: { name: string; payload: string; idempotency_key: string }) {
    const result = await this.workflows.publish(request.name, parseJsonField('payload', request.payload), {
      idempotencyKey: request.idempotency_key || undefined,
    });
    return { event_id: result.eventId, created: result.created, deliveries: result.deliveries.map(toProtoDelivery) };
  }

  @GrpcMethod('Duraflow', 'GetLogs')
  async getLogs(request: { task_id: string; after_seq: number; limit: number }) {
    if (!(await this.workflows.get(requireUuid('task_id', request.task_id)))) throw new TaskNotFoundError(request.task_id);
    const page = await this.workflows.getLogs(request.task_id, { afterSeq: request.after_seq || 0, limit: request.limit || undefined });
    return { lines: page.items.map(toProtoLogLine), next_after_seq: page.nextAfterSeq ?? 0 };
  }

  @GrpcMethod('Duraflow', 'GetEvent')
  async getEvent(request: { task_id: string; key: string; wait_ms: number }) {
    const timeoutMs = Math.min(Math.max(request.wait_ms || 0, 0), 60_000);
    const value = await this.workflows.getEvent(requireUuid('task_id', request.task_id), request.key, { timeoutMs });
    return { key: request.key, value: JSON.stringify(value ?? null) };
  }

  @GrpcMethod('Duraflow', 'GetChildren')
  async getChildren(request: { task_id: string }) {
    if (!(await this.workflows.get(requireUuid('task_id', request.task_id)))) throw new TaskNotFoundError(request.task_id);
    return { tasks: (await this.workflows.getChildren(request.task_id)).map(toProtoTask) };
  }

  @GrpcMethod('Duraflow', 'ListLimits')
  async listLimits() {
    const limits = await this.worker.readLimits();
    return { limits: limits.map((limit) => ({ ...limit, key: limit.key ?? '' })) };
  }

  @GrpcMethod('Duraflow', 'ListDeadLetters')
  async listDeadLetters(request: ListRequest & { task_id: string }) {
    const page = await this.saga.listDeadLetters({
      taskId: request.task_id ? requireUuid('task_id', request.task_id) : undefined,
      limit: request.limit || undefined,
      cursor: request.cursor || undefined,
    });
    return { dead_letters: page.items.map(toProtoDeadLetter), next_cursor: page.nextCursor ?? '' };
  }

  @GrpcMethod('Duraflow', 'RetryDeadLetter')
  async retryDeadLetter(request: { id: string }) {
    const result = await this.saga.retryDeadLetter(requireUuid('id', request.id));
    return {
      outcome: `RETRY_OUTCOME_${result.outcome.toUpperCase()}`,
      task: result.task ? toProtoTask(result.task) : null,
      dead_letter: result.deadLetter ? toProtoDeadLetter(result.deadLetter) : null,
    };
  }

  @GrpcMethod('Duraflow', 'RetryTask')
  async retryTask(request: { id: string }) {
    return toProtoTask(await this.workflows.retry(requireUuid('id', request.id)));
  }

  @GrpcMethod('Duraflow', 'ForkTask')
  async forkTask(request: { id: string; from_step: string; input: string; version?: number }) {
    const forked = await this.workflows.fork(requireUuid('id', request.id), {
      fromStep: request.from_step,
      input: parseJsonField('input', request.input),
      version: request.version ?? undefined,
    });
    return toProtoTask(forked);
  }

  @GrpcMethod('Duraflow', 'CancelTasks')
  cancelTasks(request: BulkTasksRequest & { compensate: boolean }): Promise<BulkResult> {
    return this.workflows.cancelMany(fromProtoFilter(request.filter), { ...bulkOptions(request), compensate: request.compensate });
  }

  @GrpcMethod('Duraflow', 'RetryTasks')
  retryTasks(request: BulkTasksRequest): Promise<BulkResult> {
    return this.workflows.retryMany(fromProtoFilter(request.filter), bulkOptions(request));
  }

  @GrpcMethod('Duraflow', 'ResumeTasks')
  resumeTasks(request: BulkTasksRequest): Promise<BulkResult> {
    return this.workflows.resumeMany(fromProtoFilter(request.filter), bulkOptions(request));
  }

  @GrpcMethod('Duraflow', 'DiscardDeadLetter')
  async discardDeadLetter(request: { id: string }) {
    const task = await this.saga.discardDeadLetter(requireUuid('id', request.id));
    return { task: task ? toProtoTask(task) : null };
  }
}
