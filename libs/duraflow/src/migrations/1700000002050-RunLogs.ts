import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Run logs (`ctx.log`): the lines a run kept, numbered per task (`seq`, from 1), each with its
 * level, message, metadata and, for a line logged inside a step, the step's key and attempt.
 * They go with their task as signals do (migration 900): statement triggers delete them with the
 * tasks a statement deletes (retention) and empty the table with a TRUNCATE of agent_tasks.
 */
export class RunLogs1700000002050 implements MigrationInterface {
  name = 'RunLogs1700000002050';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE task_logs (
        task_id uuid NOT NULL,
        seq integer NOT NULL,
        level varchar(8) NOT NULL,
        message text NOT NULL,
        metadata jsonb,
        step_key varchar(255),
        attempt integer,
        logged_at timestamptz NOT NULL,
        PRIMARY KEY (task_id, seq)
      )`);
    await queryRunner.query(`
      CREATE FUNCTION duraflow_delete_task_logs() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        DELETE FROM task_logs WHERE task_id IN (SELECT id FROM deleted_tasks);
        RETURN NULL;
      END $$`);
    await queryRunner.query(`
      CREATE TRIGGER duraflow_delete_task_logs
      AFTER DELETE ON agent_tasks
      REFERENCING OLD TABLE AS deleted_tasks
      FOR EACH STATEMENT
      EXECUTE FUNCTION duraflow_delete_task_logs()`);
    await queryRunner.query(`
      CREATE FUNCTION duraflow_truncate_task_logs() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        TRUNCATE task_logs;
        RETURN NULL;
      END $$`);
    await queryRunner.query(`
      CREATE TRIGGER duraflow_truncate_task_logs
      AFTER TRUNCATE ON agent_tasks
      FOR EACH STATEMENT
      EXECUTE FUNCTION duraflow_truncate_task_logs()`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TRIGGER duraflow_truncate_task_logs ON agent_tasks`);
    await queryRunner.query(`DROP FUNCTION duraflow_truncate_task_logs()`);
    await queryRunner.query(`DROP TRIGGER duraflow_delete_task_logs ON agent_tasks`);
    await queryRunner.query(`DROP FUNCTION duraflow_delete_task_logs()`);
    await queryRunner.query(`DROP TABLE task_logs`);
  }
}
