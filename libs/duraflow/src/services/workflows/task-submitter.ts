import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { AgentTask } from '../../domain/entities/agent-task.entity';
import { IdempotencyKeyConflictError } from '../../domain/errors';
import { TaskFactory } from '../../execution/task-factory';
import { DuraflowDatabase } from '../../persistence/duraflow-database';

export interface SubmitOptions {
  /** Higher runs first. Default 0. */
  priority?: number;
  /** Not claimed before this time. */
  scheduledAt?: Date | string;
  /** Recoveries after a worker died before the task fails. Default: the workflow's, else the module's (3). */
  maxRetries?: number;
  /**
   * Submitting again with the same key (for the same workflow) and the same input returns the
   * first task and creates nothing; with another input it throws IdempotencyKeyConflictError.
   */
  idempotencyKey?: string;
  /** Create the task in the caller's transaction: it exists (and is claimable) only if that commits. */
  manager?: EntityManager;
  /**
   * The workflow version to start (one this process registers); default: the newest registered.
   * An unknown version throws UnknownWorkflowVersionError and writes nothing.
   */
  version?: number;
  /**
   * The task's tags, to find it by (`list({ tags })`, the bulk filters): at most 16, each key 1 to
   * 64 characters of `[A-Za-z0-9_.-]`, each value a string of at most 256 characters (no NUL).
   * Bad tags throw InvalidSubmitOptionsError and write nothing. Default: none (`{}`).
   */
  tags?: Record<string, string>;
}

/** What `submitWithResult` resolves with. */
export interface SubmitResult {
  task: AgentTask;
  /** False when an earlier submit with the same idempotency key (and input) created the task. */
  created: boolean;
}

/** WorkflowService's submits: the task factory's checked task, created on the pool or in the caller's transaction. */
@Injectable()
export class TaskSubmitter {
  constructor(
    private readonly factory: TaskFactory,
    private readonly db: DuraflowDatabase,
  ) {}

  async submit(name: string, input: unknown, options: SubmitOptions = {}, manager?: EntityManager): Promise<SubmitResult> {
    const task = await this.factory.prepare(name, input, options ?? {});
    const executor = this.db.forManager(manager ?? options?.manager);
    // Outside a caller's transaction, concurrent submits share round trips (group commit).
    const {
      task: stored,
      created,
      sameInput,
    } = await (executor === this.db ? this.factory.createOnPool(task) : this.factory.create(task, executor));
    if (!sameInput) throw new IdempotencyKeyConflictError(name, task.idempotencyKey!, stored.id);
    return { task: stored, created };
  }

  async submitMany(name: string, inputs: unknown[], options: Omit<SubmitOptions, 'idempotencyKey'> = {}): Promise<AgentTask[]> {
    const batch = await this.factory.prepareMany(name, inputs, options ?? {});
    if (!batch.inputsJson.length) return [];
    return this.factory.createMany(batch, this.db.forManager(options?.manager));
  }
}
