import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A task's signals go with the task: whatever deletes tasks (retention, an operator's DELETE or
 * TRUNCATE) deletes their `task_signals` rows in the same statement. Triggers, not a foreign key:
 * a foreign key to agent_tasks would make `TRUNCATE agent_tasks, step_runs, dead_letter_queue`
 * (the operators' and the tests' way to empty the tables) fail, and the seed's constraints stay
 * exactly the seed's. The signals of tasks deleted before this migration are removed first.
 */
export class SignalsWithTheirTask1700000000900 implements MigrationInterface {
  name = 'SignalsWithTheirTask1700000000900';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DELETE FROM task_signals s WHERE NOT EXISTS (SELECT 1 FROM agent_tasks t WHERE t.id = s.task_id)`);
    // One DELETE of signals per statement that deletes tasks (a retention batch is one
    // statement), through idx_task_signals_task.
    await queryRunner.query(`
      CREATE FUNCTION duraflow_delete_task_signals() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        DELETE FROM task_signals WHERE task_id IN (SELECT id FROM deleted_tasks);
        RETURN NULL;
      END $$`);
    await queryRunner.query(`
      CREATE TRIGGER duraflow_delete_task_signals
      AFTER DELETE ON agent_tasks
      REFERENCING OLD TABLE AS deleted_tasks
      FOR EACH STATEMENT
      EXECUTE FUNCTION duraflow_delete_task_signals()`);
    await queryRunner.query(`
      CREATE FUNCTION duraflow_truncate_task_signals() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        TRUNCATE task_signals;
        RETURN NULL;
      END $$`);
    await queryRunner.query(`
      CREATE TRIGGER duraflow_truncate_task_signals
      AFTER TRUNCATE ON agent_tasks
      FOR EACH STATEMENT
      EXECUTE FUNCTION duraflow_truncate_task_signals()`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TRIGGER duraflow_truncate_task_signals ON agent_tasks`);
    await queryRunner.query(`DROP FUNCTION duraflow_truncate_task_signals()`);
    await queryRunner.query(`DROP TRIGGER duraflow_delete_task_signals ON agent_tasks`);
    await queryRunner.query(`DROP FUNCTION duraflow_delete_task_signals()`);
  }
}
