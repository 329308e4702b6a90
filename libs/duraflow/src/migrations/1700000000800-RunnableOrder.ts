import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The limited claim serves each key's tasks in the runnable order both claims share (priority,
 * then the time a task became runnable: its `scheduled_at`, else its creation), as
 * idx_agent_tasks_claim has held it since migration 200: a task woken from a sleep no longer
 * queues behind tasks created after it but runnable later. Its index is rebuilt in that order;
 * nothing of the base schema changes.
 */
export class RunnableOrder1700000000800 implements MigrationInterface {
  name = 'RunnableOrder1700000000800';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX idx_agent_tasks_flow_pending`);
    await queryRunner.query(`
      CREATE INDEX idx_agent_tasks_flow_pending
      ON agent_tasks(workflow_name, concurrency_key, priority DESC, (COALESCE(scheduled_at, created_at, '-infinity'::timestamptz)), id)
      WHERE status = 'pending' AND concurrency_key IS NOT NULL`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX idx_agent_tasks_flow_pending`);
    await queryRunner.query(`
      CREATE INDEX idx_agent_tasks_flow_pending
      ON agent_tasks(workflow_name, concurrency_key, priority DESC, created_at, id)
      WHERE status = 'pending' AND concurrency_key IS NOT NULL`);
  }
}
