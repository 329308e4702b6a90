import { TestingModule } from '@nestjs/testing';
import { DeadLetterBusyError, SagaService, TaskStatus, workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { useTestBed } from './support/test-bed';

/*
 * A dead letter's retry runs the user's compensation outside any transaction: the entry is
 * claimed (an advisory lock held by a session of its own) instead of row-locked, so nothing is
 * locked and no pooled connection is held for as long as the compensation takes; a retry whose
 * session dies leaves the entry to be retried.
 */
describe('Dead-letter retry claim', () => {
  const bed = useTestBed({ databasePerTest: true });
  let app: TestingModule;
  /** What the compensation does on its next call. */
  let undo: () => Promise<void>;
  let undoCalls: number;

  const refundable = workflow(
    'refundable',
    async (ctx: WorkflowContext) => {
      await ctx.step.run('charge', () => ({ charge: 'ch_1' }));
      await ctx.step.run('ship', () => {
        throw new Error('no courier');
      });
    },
    {
      compensations: {
        charge: async () => {
          undoCalls++;
          await undo();
        },
      },
    },
  );

  beforeEach(async () => {
    undoCalls = 0;
    undo = async () => {
      throw new Error('refund refused');
    };
    app = await bed.start({ duraflow: { workflows: [refundable], compensation: { retries: 0 } } });
  });

  /** A task of `refundable` that ended partial_rollback, and its one dead letter. */
  async function deadLettered(): Promise<{ taskId: string; deadLetterId: string }> {
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('refundable', {});
    expect((await workflows.waitFor(task.id, { timeoutMs: 15_000 })).status).toBe(TaskStatus.PARTIAL_ROLLBACK);
    const { items } = await app.get(SagaService).listDeadLetters({ taskId: task.id });
    expect(items).toHaveLength(1);
    return { taskId: task.id, deadLetterId: items[0].id };
  }

  /** The next compensation call waits until `open()`; `reached` resolves once it is waiting. */
  function gateTheUndo(): { reached: Promise<void>; open: () => void } {
    let open!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    let reached!: () => void;
    const reachedPromise = new Promise<void>((resolve) => (reached = resolve));
    undo = async () => {
      reached();
      await opened;
    };
    return { reached: reachedPromise, open };
  }

  it('runs the compensation with no transaction open and no table locked, turns other retries and discards away meanwhile, then resolves the entry', async () => {
    const { taskId, deadLetterId } = await deadLettered();
    const saga = app.get(SagaService);
    const gate = gateTheUndo();

    const retry = saga.retryDeadLetter(deadLetterId);
    await gate.reached;
    // The worker's own short transactions (claim polls, the reaper) come and go meanwhile; what
    // the retry would hold lasts as long as the gate stays shut, so only transactions that began
    // before the gate was reached count.
    const { rows: reachedAt } = await bed.db.client.query(`SELECT clock_timestamp() AS at`);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const { rows: open } = await bed.db.client.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND state LIKE 'idle in transaction%' AND xact_start < $1`,
      [reachedAt[0].at],
    );
    expect(open[0].n).toBe(0);
    const { rows: locks } = await bed.db.client.query(
      `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation JOIN pg_stat_activity a ON a.pid = l.pid
       WHERE c.relname IN ('agent_tasks', 'step_runs', 'dead_letter_queue') AND l.pid <> pg_backend_pid() AND a.xact_start < $1`,
      [reachedAt[0].at],
    );
    expect(locks[0].n).toBe(0);
    await expect(saga.retryDeadLetter(deadLetterId)).rejects.toBeInstanceOf(DeadLetterBusyError);
    await expect(saga.discardDeadLetter(deadLetterId)).rejects.toBeInstanceOf(DeadLetterBusyError);
    gate.open();

    const result = await retry;
    expect(result).toMatchObject({ outcome: 'compensated', deadLetter: null, task: { id: taskId, status: TaskStatus.ROLLED_BACK } });
    expect(undoCalls).toBe(2); // the rollback's attempt, then this retry's: the turned-away retry ran nothing
    const { rows: steps } = await bed.db.client.query(`SELECT compensated_at FROM step_runs WHERE task_id = $1 AND step_key = 'charge'`, [
      taskId,
    ]);
    expect(steps[0].compensated_at).not.toBeNull();
  });

  it('leaves the entry to be retried when the retry’s session dies while the compensation runs', async () => {
    const { taskId, deadLetterId } = await deadLettered();
    const saga = app.get(SagaService);
    const gate = gateTheUndo();

    const retry = saga.retryDeadLetter(deadLetterId);
    await gate.reached;
    // As a crash of the retrying process would: its session ends, and the claim with it.
    const { rows: killed } = await bed.db.client.query(
      `SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity
       WHERE datname = current_database() AND application_name = 'duraflow dead-letter retry'`,
    );
    expect(killed).toEqual([{ killed: true }]);
    gate.open();
    await expect(retry).rejects.toThrow();

    const { rows: entries } = await bed.db.client.query(`SELECT id, retry_count FROM dead_letter_queue WHERE task_id = $1`, [taskId]);
    expect(entries).toEqual([{ id: deadLetterId, retry_count: 0 }]);
    undo = async () => undefined;
    const again = await saga.retryDeadLetter(deadLetterId);
    expect(again).toMatchObject({ outcome: 'compensated', task: { status: TaskStatus.ROLLED_BACK } });
  });
});
