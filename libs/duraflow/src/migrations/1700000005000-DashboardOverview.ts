import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What the dashboard's overview and workflow pages need:
 * - `duraflow_schedules.paused_at`: a paused schedule (the dashboard's Pause, `pauseSchedule`)
 *   starts no task on any node until resumed; its ticks meanwhile are recorded as done.
 * - `idx_agent_tasks_completed`: the tasks finished in a time range (the overview's charts read
 *   the newest minutes by it, the rollup an hour at a time).
 * - `duraflow_task_rollup`: per workflow and hour, the tasks started, completed, failed, rolled
 *   back and cancelled, and a histogram of the finished ones' durations (bucket number -> tasks,
 *   persistence/sql/task-stats.ts); the reaper's leader adds each hour once it is over
 *   (`duraflow_task_rollup_state.rolled_until`), so the overview of a week reads about 170 rows
 *   per workflow, not the week's tasks. Retention does not touch
 *   it (a deleted task still happened); hours older than 8 days are pruned by the rollup itself.
 */
export class DashboardOverview1700000005000 implements MigrationInterface {
  name = 'DashboardOverview1700000005000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE duraflow_schedules ADD COLUMN paused_at TIMESTAMPTZ`);
    await queryRunner.query(`CREATE INDEX idx_agent_tasks_completed ON agent_tasks(completed_at) WHERE completed_at IS NOT NULL`);
    await queryRunner.query(`CREATE TABLE duraflow_task_rollup (
      hour TIMESTAMPTZ NOT NULL,
      workflow_name VARCHAR(255) NOT NULL,
      started INTEGER NOT NULL DEFAULT 0,
      completed INTEGER NOT NULL DEFAULT 0,
      failed INTEGER NOT NULL DEFAULT 0,
      rolled_back INTEGER NOT NULL DEFAULT 0,
      cancelled INTEGER NOT NULL DEFAULT 0,
      durations JSONB NOT NULL DEFAULT '{}',
      PRIMARY KEY (hour, workflow_name)
    )`);
    await queryRunner.query(`CREATE TABLE duraflow_task_rollup_state (
      id SMALLINT PRIMARY KEY CHECK (id = 1),
      rolled_until TIMESTAMPTZ NOT NULL
    )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE duraflow_task_rollup_state`);
    await queryRunner.query(`DROP TABLE duraflow_task_rollup`);
    await queryRunner.query(`DROP INDEX idx_agent_tasks_completed`);
    await queryRunner.query(`ALTER TABLE duraflow_schedules DROP COLUMN paused_at`);
  }
}
