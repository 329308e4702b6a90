import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Callbacks (`ctx.createCallback`): one row per callback a run opened, its id derived from the
 * task and its key (so a replay finds the same row), `open` until the first completion makes it
 * `completed` (one conditional UPDATE: two racing POSTs, one wins) or its wait times out
 * (`expired`). The payload is what the completion carried, as the codec encoded it. They go with
 * their task as signals do (migration 900): statement triggers delete them with the tasks a
 * statement deletes (retention) and empty the table with a TRUNCATE of agent_tasks.
 */
export class Callbacks1700000003100 implements MigrationInterface {
  name = 'Callbacks1700000003100';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE task_callbacks (
        id uuid PRIMARY KEY,
        task_id uuid NOT NULL,
        key varchar(255) NOT NULL,
        status varchar(10) NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'completed', 'expired')),
        expires_at timestamptz,
        payload jsonb,
        created_at timestamptz NOT NULL DEFAULT now(),
        completed_at timestamptz,
        UNIQUE (task_id, key)
      )`);
    await queryRunner.query(`
      CREATE FUNCTION duraflow_delete_task_callbacks() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        DELETE FROM task_callbacks WHERE task_id IN (SELECT id FROM deleted_tasks);
        RETURN NULL;
      END $$`);
    await queryRunner.query(`
      CREATE TRIGGER duraflow_delete_task_callbacks
      AFTER DELETE ON agent_tasks
      REFERENCING OLD TABLE AS deleted_tasks
      FOR EACH STATEMENT
      EXECUTE FUNCTION duraflow_delete_task_callbacks()`);
    await queryRunner.query(`
      CREATE FUNCTION duraflow_truncate_task_callbacks() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        TRUNCATE task_callbacks;
        RETURN NULL;
      END $$`);
    await queryRunner.query(`
      CREATE TRIGGER duraflow_truncate_task_callbacks
      AFTER TRUNCATE ON agent_tasks
      FOR EACH STATEMENT
      EXECUTE FUNCTION duraflow_truncate_task_callbacks()`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TRIGGER duraflow_truncate_task_callbacks ON agent_tasks`);
    await queryRunner.query(`DROP FUNCTION duraflow_truncate_task_callbacks()`);
    await queryRunner.query(`DROP TRIGGER duraflow_delete_task_callbacks ON agent_tasks`);
    await queryRunner.query(`DROP FUNCTION duraflow_delete_task_callbacks()`);
    await queryRunner.query(`DROP TABLE task_callbacks`);
  }
}
