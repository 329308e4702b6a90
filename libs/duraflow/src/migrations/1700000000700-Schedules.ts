import { MigrationInterface, QueryRunner } from 'typeorm';

/** The state of schedules (`forRoot({ schedules })`, `@Workflow(name, { schedule })`): two new tables, nothing else changed. */
export class Schedules1700000000700 implements MigrationInterface {
  name = 'Schedules1700000000700';

  async up(queryRunner: QueryRunner): Promise<void> {
    // One row per schedule a node has ticked. The code defines a schedule; the row remembers,
    // across restarts, the newest tick done (last_tick_at), from which a booting node counts the
    // ticks missed while no node ran. workflow, cron and timezone are what the last node to
    // boot defines, for operators (`duraflow status`). A schedule removed from the code keeps
    // its row (it stops ticking); defined again under the same name, it catches up from there.
    await queryRunner.query(`CREATE TABLE duraflow_schedules (
      name VARCHAR(200) PRIMARY KEY,
      workflow_name VARCHAR(255) NOT NULL,
      cron VARCHAR(255) NOT NULL,
      timezone VARCHAR(100) NOT NULL,
      last_tick_at TIMESTAMPTZ,
      created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
      updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )`);

    // One row per tick that started a task: the primary key makes the tick's task exist once
    // whichever nodes try it at the same time (the row and its task commit together). No
    // foreign key to agent_tasks: a task may be deleted, its tick stays done.
    await queryRunner.query(`CREATE TABLE duraflow_schedule_ticks (
      schedule_name VARCHAR(200) NOT NULL,
      tick_at TIMESTAMPTZ NOT NULL,
      task_id UUID,
      created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
      PRIMARY KEY (schedule_name, tick_at)
    )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE duraflow_schedule_ticks`);
    await queryRunner.query(`DROP TABLE duraflow_schedules`);
  }
}
