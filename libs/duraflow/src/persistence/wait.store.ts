import { Injectable } from '@nestjs/common';
import { AgentTask } from '../domain/entities/agent-task.entity';
import { DuraflowDatabase, SqlExecutor } from './duraflow-database';
import { ownedTaskRow } from './fencing';
import { countLiteral, textLiteral } from './literals';
import { TASK_COLUMNS, toAgentTask } from './row-mappers';
import { markCompensatedSql } from './step.store';
import { cancelDescendants } from './sql/cancel-descendants';
import { sendSignal, SentSignal } from './sql/send-signal';
import { settleWait, WaitSettlement, WaitToSettle } from './sql/settle-wait';
import { ChildToStart, startChild } from './sql/start-child';

/** A signal as `getSignals` lists it. */
export interface TaskSignal {
  id: string;
  name: string;
  payload: unknown;
  createdAt: Date;
  /** When a wait took it; null while it is kept for a wait to come. */
  consumedAt: Date | null;
  /** The key of the wait that took it. */
  consumedByStep: string | null;
}

/**
 * The statements of the durable primitives: a run's waits (sleep, signal, child) settled or
 * suspended under its claim, a child started with its parent's step, a signal kept, a cancel
 * carried down to the children, and the reads of signals and children. The statements that
 * span tables live in sql/, one file per operation.
 */
@Injectable()
export class WaitStore {
  constructor(private readonly db: DuraflowDatabase) {}

  /** sql/settle-wait.ts: one round trip, its own implicit transaction. */
  settleWait(wait: WaitToSettle): Promise<WaitSettlement> {
    return settleWait(this.db, wait);
  }

  /**
   * A sleep whose end has passed, reached again by the run it suspended: its `waiting` row is
   * completed in one statement, fenced on the claim (no signal or child to look at, so nothing
   * to lock first). False when the claim no longer owns the task or the row is not waiting.
   */
  async completeDueSleep(taskId: string, claimToken: string, stepKey: string, completionSeq: number): Promise<boolean> {
    // Committed without waiting for its WAL flush, as the claim and a wait's settle are: losing it
    // in a crash leaves the row `waiting` with its wake-up passed, so the replay completes the same
    // sleep again (its end was fixed when it was first reached); every later synchronous commit of
    // the run (a checkpoint, the completion) flushes the WAL past it. One round trip, simple protocol.
    const task = textLiteral(taskId);
    const { rowCount } = await this.db.query(
      `/* duraflow_complete_sleep */ SELECT set_config('synchronous_commit', 'off', true);
       UPDATE step_runs SET status = 'completed', completed_at = clock_timestamp(), completion_seq = ${countLiteral(completionSeq)}
       WHERE task_id = ${task} AND step_key = ${textLiteral(stepKey)} AND kind = 'sleep' AND status = 'waiting'
         AND wake_at <= clock_timestamp()
         AND EXISTS (${ownedTaskRow(task, textLiteral(claimToken))})`,
    );
    return rowCount > 0;
  }

  /** sql/start-child.ts, in a transaction of its own. Null when the claim no longer owns the parent. */
  startChild(child: ChildToStart): Promise<{ childTaskId: string } | null> {
    return this.db.transaction((tx) => startChild(tx, child));
  }

  /** sql/send-signal.ts: one round trip, its own implicit transaction. */
  sendSignal(taskId: string, name: string, payloadJson: string | null): Promise<SentSignal> {
    return sendSignal(this.db, taskId, name, payloadJson);
  }

  /** sql/cancel-descendants.ts. */
  cancelDescendants(rootIds: string[], options: { includeRoots: boolean; compensate: boolean }): Promise<string[]> {
    return cancelDescendants(this.db, rootIds, options);
  }

  /** The tasks the task started with startChild / runChild, oldest first (idx_agent_tasks_parent). */
  async listChildren(parentTaskId: string): Promise<AgentTask[]> {
    const { rows } = await this.db.query(
      `SELECT ${TASK_COLUMNS} FROM agent_tasks WHERE parent_task_id = $1 ORDER BY created_at, id`,
      [parentTaskId],
      'duraflow_list_children',
    );
    return rows.map(toAgentTask);
  }

  /** The signals sent to a task, in the order they were sent. */
  async listSignals(taskId: string): Promise<TaskSignal[]> {
    const { rows } = await this.db.query(
      `SELECT id, name, payload, created_at, consumed_at, consumed_by_step FROM task_signals WHERE task_id = $1 ORDER BY id`,
      [taskId],
    );
    return rows.map((row) => ({
      id: String(row.id),
      name: row.name,
      payload: row.payload,
      createdAt: row.created_at,
      consumedAt: row.consumed_at,
      consumedByStep: row.consumed_by_step,
    }));
  }

  /** The child that the step `stepKey` of task `parentTaskId` started, if it started one. */
  async findChild(parentTaskId: string, stepKey: string): Promise<AgentTask | null> {
    const { rows } = await this.db.query(`SELECT ${TASK_COLUMNS} FROM agent_tasks WHERE parent_task_id = $1 AND parent_step_key = $2`, [
      parentTaskId,
      stepKey,
    ]);
    return rows.length ? toAgentTask(rows[0]) : null;
  }

  /**
   * The dead letters still open on the child that the step `stepKey` of `parentTaskId` started
   * (its own steps', which hold its children's in turn): a parent's dead letter for that step
   * resolves once there are none. Null when the step started no child.
   */
  async openDeadLettersOfChild(
    executor: SqlExecutor,
    parentTaskId: string,
    stepKey: string,
  ): Promise<{ childTaskId: string; open: number } | null> {
    const { rows } = await executor.query(
      `SELECT c.id, (SELECT count(*)::int FROM dead_letter_queue d WHERE d.task_id = c.id) AS open
       FROM agent_tasks c WHERE c.parent_task_id = $1 AND c.parent_step_key = $2`,
      [parentTaskId, stepKey],
    );
    return rows.length ? { childTaskId: rows[0].id, open: rows[0].open } : null;
  }

  /**
   * Fenced on the claim of the rollback of the parent (`ownerId`, `claimToken`): the compensation
   * of a step of its finished child `taskId` succeeded.
   */
  async markChildStepCompensated(ownerId: string, claimToken: string, taskId: string, stepId: string): Promise<boolean> {
    const { rowCount } = await this.db.query(markCompensatedSql('$2', `task_id = $1 AND EXISTS (${ownedTaskRow('$3', '$4')})`), [
      taskId,
      stepId,
      ownerId,
      claimToken,
    ]);
    return rowCount > 0;
  }

  /** Fenced as markChildStepCompensated: the compensation of a step of the finished child failed for good. */
  async deadLetterChildStep(ownerId: string, claimToken: string, taskId: string, stepId: string, errorJson: string): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `INSERT INTO dead_letter_queue (task_id, step_id, error)
       SELECT $1, $2, $3::jsonb FROM (${ownedTaskRow('$4', '$5')}) owner
       ON CONFLICT (step_id) DO UPDATE SET error = EXCLUDED.error
       RETURNING id`,
      [taskId, stepId, errorJson, ownerId, claimToken],
    );
    return rowCount > 0;
  }
}
