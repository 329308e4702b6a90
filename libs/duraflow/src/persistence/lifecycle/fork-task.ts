import { AgentTask } from '../../domain/entities/agent-task.entity';
import { DuraflowDatabase, SqlExecutor } from '../duraflow-database';
import { createTask, NewTask } from './create-tasks';

/** A fork to create: the new task as the task factory prepared it, with its origin. */
export interface NewFork extends NewTask {
  forkedFrom: { taskId: string; fromStep: string };
}

/** What a fork found: the new task, or what was missing (nothing written then). */
export type ForkOutcome = { task: AgentTask; copiedSteps: number } | { missing: 'task' | 'step' };

/**
 * The steps a fork copies: the original's completed rows recorded before `fromStep` in the run's
 * completion order (`completion_seq`). fromStep's place (`$3` its key) is read in the same
 * statement, so in the same snapshot as the rows copied: a fromStep that completes while the
 * fork is made cannot leave it copying itself and what followed. NULL when fromStep has not
 * completed (a failed step, a wait): every completed row precedes it. Steps, sleeps that passed, signals
 * taken, children started (their link is the row's input) and patch markers are all such rows;
 * their outputs, attempts and compensation state go with them, so the fork never runs them
 * (and never undoes again what the original's rollback undid).
 */
const COPY_STEPS = `INSERT INTO step_runs (task_id, step_key, kind, status, input, output, error, compensation_fn, compensated_at,
                              started_at, completed_at, created_at, attempt, completion_seq, wake_at)
   SELECT $2, s.step_key, s.kind, s.status, s.input, s.output, s.error, s.compensation_fn, s.compensated_at,
          s.started_at, s.completed_at, s.created_at, s.attempt, s.completion_seq, s.wake_at
   FROM step_runs s
   CROSS JOIN LATERAL (SELECT (SELECT f.completion_seq FROM step_runs f
                               WHERE f.task_id = $1 AND f.step_key = $3 AND f.status = 'completed') AS place) AS fork_point
   WHERE s.task_id = $1 AND s.status = 'completed' AND s.completion_seq IS NOT NULL
     AND (fork_point.place IS NULL OR s.completion_seq < fork_point.place)
   ORDER BY s.completion_seq`;

/**
 * The original's history names the fork (`{ kind: 'forked', at, forkId, fromStep }`), so each of
 * the two tasks links to the other. Not a move: the original's status and claim are untouched.
 */
const NOTE_FORK = `UPDATE agent_tasks
   SET history = COALESCE(history, '[]'::jsonb)
                 || jsonb_build_array(jsonb_build_object('kind', 'forked', 'at', now(), 'forkId', $2::uuid, 'fromStep', $3::text))
   WHERE id = $1`;

/**
 * The create move of a fork, in one transaction with the copy of the original's steps before
 * `fromStep`: the original row is locked against deletion (KEY SHARE: its run goes on) and
 * `fromStep` looked up first; an unknown task or step writes nothing. The NOTIFY of the create is
 * sent on commit, once the copied steps are there.
 */
export function forkTask(db: DuraflowDatabase, fork: NewFork, recode?: (forkId: string) => StepRecoder): Promise<ForkOutcome> {
  return db.transaction(async (tx: SqlExecutor) => {
    const { taskId, fromStep } = fork.forkedFrom;
    const original = await tx.query(`SELECT 1 FROM agent_tasks WHERE id = $1 AND deleted_at IS NULL FOR KEY SHARE`, [taskId]);
    if (!original.rows.length) return { missing: 'task' as const };
    const step = await tx.query(`SELECT 1 FROM step_runs WHERE task_id = $1 AND step_key = $2`, [taskId, fromStep]);
    if (!step.rows.length) return { missing: 'step' as const };
    const { task } = await createTask(tx, fork);
    const copied = await tx.query(COPY_STEPS, [taskId, task.id, fromStep], 'duraflow_fork_copy_steps');
    if (recode) await recodeCopiedSteps(tx, task.id, recode(task.id));
    await tx.query(NOTE_FORK, [taskId, task.id, fromStep], 'duraflow_fork_note');
    return { task, copiedSteps: copied.rowCount };
  });
}

/** A copied step row's output and error as JSON text for the fork (a codec re-encodes them: its ciphertexts are bound to their task). */
export type StepRecoder = (row: { kind: string | null; input: unknown; output: unknown; error: unknown }) => {
  outputJson: string | null;
  errorJson: string | null;
};

/** With a codec, the fork's copied rows rewritten in the same transaction, each bound to the fork's id. */
async function recodeCopiedSteps(tx: SqlExecutor, forkId: string, recode: StepRecoder): Promise<void> {
  const { rows } = await tx.query(`SELECT id, kind, input, output, error FROM step_runs WHERE task_id = $1`, [forkId]);
  for (const row of rows) {
    const { outputJson, errorJson } = recode(row);
    await tx.query(`UPDATE step_runs SET output = $2::jsonb, error = $3::jsonb WHERE id = $1`, [row.id, outputJson, errorJson]);
  }
}
