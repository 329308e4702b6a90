import { Column, CreateDateColumn, DeleteDateColumn, Entity, Index, PrimaryGeneratedColumn, UpdateDateColumn } from 'typeorm';
import { TaskStatus } from '../task-status';

/** A workflow run: one row of `agent_tasks` (base schema), plus the engine's own columns. */
@Entity({ name: 'agent_tasks' })
@Index('idx_agent_tasks_status_scheduled_priority', ['status', 'scheduledAt', 'priority'], {
  where: `status = 'pending'`,
})
@Index('idx_agent_tasks_heartbeat', ['heartbeatAt'], { where: `status = 'running'` })
@Index('idx_agent_tasks_completed', ['completedAt'], { where: 'completed_at IS NOT NULL' })
@Index('idx_agent_tasks_idempotency', ['workflowName', 'idempotencyKey'], {
  unique: true,
  where: 'idempotency_key IS NOT NULL',
})
// Engine indexes with DESC keys, which @Index cannot spell: the migration owns them.
@Index('idx_agent_tasks_claim', { synchronize: false })
@Index('idx_agent_tasks_created', { synchronize: false })
@Index('idx_agent_tasks_status_created', { synchronize: false })
@Index('idx_agent_tasks_flow_pending', { synchronize: false })
@Index('idx_agent_tasks_flow_running', { synchronize: false })
@Index('idx_agent_tasks_parent', { synchronize: false })
@Index('idx_agent_tasks_forked_from', { synchronize: false })
@Index('idx_agent_tasks_tags', { synchronize: false })
export class AgentTask {
  // How TypeORM reads back `UUID PRIMARY KEY DEFAULT gen_random_uuid()`; a plain default would drift.
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'workflow_name', type: 'varchar', length: 255 })
  workflowName: string;

  @Column({ type: 'varchar', length: 50, default: TaskStatus.PENDING })
  status: TaskStatus;

  @Column({ type: 'jsonb', nullable: true, default: () => `'{}'` })
  input: unknown;

  @Column({ type: 'jsonb', nullable: true })
  output: unknown;

  @Column({ type: 'jsonb', nullable: true })
  error: TaskError | null;

  @Column({ type: 'integer', nullable: true, default: 0 })
  priority: number;

  @Column({ name: 'scheduled_at', type: 'timestamptz', nullable: true })
  scheduledAt: Date | null;

  @Column({ name: 'started_at', type: 'timestamptz', nullable: true })
  startedAt: Date | null;

  @Column({ name: 'completed_at', type: 'timestamptz', nullable: true })
  completedAt: Date | null;

  @Column({ name: 'heartbeat_at', type: 'timestamptz', nullable: true })
  heartbeatAt: Date | null;

  @Column({ name: 'worker_id', type: 'varchar', length: 255, nullable: true })
  workerId: string | null;

  @Column({ name: 'retry_count', type: 'integer', nullable: true, default: 0 })
  retryCount: number;

  @Column({ name: 'max_retries', type: 'integer', nullable: true, default: 3 })
  maxRetries: number;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz', nullable: true, default: () => 'NOW()' })
  createdAt: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz', nullable: true, default: () => 'NOW()' })
  updatedAt: Date;

  @DeleteDateColumn({ name: 'deleted_at', type: 'timestamptz', nullable: true })
  deletedAt: Date | null;

  /** Engine column: the key that makes `submit` idempotent (unique per workflow). */
  @Column({ name: 'idempotency_key', type: 'varchar', length: 255, nullable: true })
  idempotencyKey: string | null;

  /** Engine column: the fencing token of the current claim; writes of an older claim land nowhere. */
  @Column({ name: 'claim_token', type: 'uuid', nullable: true, select: false })
  claimToken?: string | null;

  /**
   * Engine column: set while the task's completed steps are being compensated (`failed`: a
   * step failed for good or the reaper gave up; `cancelled`: cancel with compensate). A task
   * claimed with it set resumes its rollback rather than running its workflow.
   */
  @Column({ name: 'rollback_reason', type: 'varchar', length: 20, nullable: true })
  rollbackReason: RollbackReason | null;

  /**
   * Engine column: the W3C trace context (`traceparent`, `tracestate`) active when the task was
   * submitted, so its runs continue that trace (OpenTelemetry, when installed). Read by the claim only.
   */
  @Column({ name: 'trace_context', type: 'jsonb', nullable: true, select: false })
  traceContext?: Record<string, string> | null;

  /**
   * Engine column: the version of its workflow the task started on (`@Workflow(name, { version })`);
   * null when the workflow declared none, which is version 1. Only a worker that registers this
   * version claims the task.
   */
  @Column({ name: 'workflow_version', type: 'integer', nullable: true })
  workflowVersion: number | null;

  /**
   * Engine column: set while the determinism guard holds the task (its code took another path
   * than the one recorded; `error` holds the NonDeterminismError). It stays `pending` and is not
   * claimed until `workflows.resume(id)`.
   */
  @Column({ name: 'held_at', type: 'timestamptz', nullable: true })
  heldAt: Date | null;

  /**
   * Engine column: set at submit for a workflow with flow control (its `concurrencyKey` of the
   * input, `''` when it has none); null for a workflow without.
   */
  @Column({ name: 'concurrency_key', type: 'varchar', length: 255, nullable: true })
  concurrencyKey: string | null;
  /** Engine column: the task whose `ctx.startChild` / `ctx.runChild` started this one (null for a task submitted directly). */
  @Column({ name: 'parent_task_id', type: 'uuid', nullable: true })
  parentTaskId: string | null;

  /** Engine column: the key of the parent's step that started this task. */
  @Column({ name: 'parent_step_key', type: 'varchar', length: 255, nullable: true })
  parentStepKey: string | null;

  /**
   * Engine column: what happened to the task besides its runs, oldest first: each
   * `workflows.retry` (the status it left and the error it had failed with) and each fork made
   * from it (the fork's id and step). Read through the library: [] when nothing has (the column is null).
   */
  @Column({ type: 'jsonb', nullable: true })
  history: TaskHistoryEntry[] | null;

  /** Engine column: the task this one was forked from (`workflows.fork`); null for a task that is no fork. */
  @Column({ name: 'forked_from', type: 'uuid', nullable: true })
  forkedFromTaskId: string | null;

  /** Engine column: the step of the original the fork ran anew from. */
  @Column({ name: 'forked_from_step', type: 'varchar', length: 255, nullable: true })
  forkedFromStep: string | null;

  /** The fork's origin, from the two columns above (set when read through the library; null for a task that is no fork). */
  forkedFrom?: ForkOrigin | null;

  /** Engine column: the task's tags (`submit(..., { tags })`), {} when it has none; a child's are its parent's unless given. */
  @Column({ type: 'jsonb', default: () => `'{}'` })
  tags: Record<string, string>;
}

export type RollbackReason = 'failed' | 'cancelled';

/** One entry of a task's history (`AgentTask.history`): a retry of the task, or a fork made from it. */
export type TaskHistoryEntry = TaskRetriedEntry | TaskForkedEntry;

/** `retried`: `workflows.retry` ran the task again from where it stopped. */
export interface TaskRetriedEntry {
  kind: 'retried';
  /** When (ISO-8601). */
  at: string;
  /** The status the task left (`failed` or `cancelled`). */
  fromStatus: string;
  /** The error the task had then (cleared on the task by the retry), or null. */
  error: TaskError | null;
}

/** `forked`: `workflows.fork` made a new task from this one (the fork's `forkedFrom` names this task back). */
export interface TaskForkedEntry {
  kind: 'forked';
  /** When (ISO-8601). */
  at: string;
  /** The new task's id. */
  forkId: string;
  /** The step the fork runs anew from. */
  fromStep: string;
}

/** Where a fork came from: the original task and the step it ran anew from. */
export interface ForkOrigin {
  taskId: string;
  fromStep: string;
}

/** What a failed task keeps in `agent_tasks.error`. */
export interface TaskError {
  message: string;
  name: string;
  /** The step that failed for good, when a step failed. */
  stepKey?: string;
  stack?: string;
  /** A stable machine-readable reason, e.g. `STEP_FAILED`, `WORKFLOW_FAILED`, `MAX_RETRIES_EXCEEDED`. */
  code?: string;
  /** Attempts made of the failing step. */
  attempts?: number;
  /** A held task's NonDeterminismError (`code: 'NON_DETERMINISM'`): the recorded step the code had not asked for. */
  recordedStep?: string;
  /** …and the step it asked for instead (null: it returned). */
  requestedStep?: string | null;
}
