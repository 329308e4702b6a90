import { Client } from 'pg';

/** A row as pg returns it: column names as keys, values as the tests assert on them. */
type Row = any;

/**
 * Duraflow's three tables read past the library, on the test's own connection (the truth,
 * whatever an app can reach), with the raw column names and values a test asserts on.
 */
export class TableRows {
  constructor(private readonly client: Client) {}

  /** The agent_tasks row, every column (claim_token and rollback_reason included). */
  async task(id: string): Promise<Row> {
    const { rows } = await this.client.query(`SELECT * FROM agent_tasks WHERE id = $1`, [id]);
    if (!rows.length) throw new Error(`No agent_tasks row ${id}`);
    return rows[0];
  }

  /** agent_tasks by status, e.g. `{ pending: 7, running: 3 }`. */
  async countByStatus(): Promise<Record<string, number>> {
    const { rows } = await this.client.query<{ status: string; n: number }>(
      `SELECT status, count(*)::int AS n FROM agent_tasks GROUP BY status ORDER BY status`,
    );
    return Object.fromEntries(rows.map((row) => [row.status, row.n]));
  }

  /** Rows of `table` (that match `where`, with its `$1`… in `values`). */
  async count(table: 'agent_tasks' | 'step_runs' | 'dead_letter_queue', where = 'TRUE', values: unknown[] = []): Promise<number> {
    const { rows } = await this.client.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE ${where}`, values);
    return rows[0].n;
  }

  /**
   * The step_runs rows of a task in the order its run completed them, the unfinished last; every
   * column, and `output_is_sql_null` (a step that returned undefined) beside `output`.
   */
  async steps(taskId: string): Promise<Row[]> {
    const { rows } = await this.client.query(
      `SELECT *, output IS NULL AS output_is_sql_null FROM step_runs WHERE task_id = $1 ORDER BY completion_seq NULLS LAST, created_at, step_key`,
      [taskId],
    );
    return rows;
  }

  async step(taskId: string, stepKey: string): Promise<Row> {
    const row = (await this.steps(taskId)).find((step) => step.step_key === stepKey);
    if (!row) throw new Error(`No step_runs row ${stepKey} for task ${taskId}`);
    return row;
  }

  /** The keys of a task's completed steps, in completion order. */
  async completedStepKeys(taskId: string): Promise<string[]> {
    return (await this.steps(taskId)).filter((step) => step.status === 'completed').map((step) => step.step_key);
  }

  /** The keys of a task's steps marked undone, in the order they were marked. */
  async compensatedStepKeys(taskId: string): Promise<string[]> {
    const { rows } = await this.client.query<{ step_key: string }>(
      `SELECT step_key FROM step_runs WHERE task_id = $1 AND compensated_at IS NOT NULL ORDER BY compensated_at`,
      [taskId],
    );
    return rows.map((row) => row.step_key);
  }

  /** dead_letter_queue rows (of one task, or all), newest first, each with its step's key. */
  async deadLetters(taskId?: string): Promise<Row[]> {
    const { rows } = await this.client.query(
      `SELECT d.*, s.step_key FROM dead_letter_queue d JOIN step_runs s ON s.id = d.step_id
       WHERE $1::uuid IS NULL OR d.task_id = $1 ORDER BY d.created_at DESC, d.id DESC`,
      [taskId ?? null],
    );
    return rows;
  }

  /** A pending task written straight into the table, as another application (or SQL) would: no NOTIFY. */
  async insertTask(workflowName: string, input: unknown = {}, priority = 0): Promise<string> {
    const { rows } = await this.client.query<{ id: string }>(
      `INSERT INTO agent_tasks (workflow_name, input, priority) VALUES ($1, $2::jsonb, $3) RETURNING id`,
      [workflowName, JSON.stringify(input), priority],
    );
    return rows[0].id;
  }
}
