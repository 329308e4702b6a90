import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Retry and fork (workflows.retry, workflows.fork). `history`: what happened to the task besides
 * its runs, oldest first (a retry's entry keeps the error the task had failed with, which the
 * retry clears). `forked_from` and `forked_from_step`: the task a fork was made from and the step
 * it runs anew from (no foreign key: retention deletes an original without its forks). A partial
 * index lists the forks of a task.
 */
export class RetryAndFork1700000001000 implements MigrationInterface {
  name = 'RetryAndFork1700000001000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE agent_tasks ADD COLUMN history JSONB`);
    await queryRunner.query(`ALTER TABLE agent_tasks ADD COLUMN forked_from UUID`);
    await queryRunner.query(`ALTER TABLE agent_tasks ADD COLUMN forked_from_step VARCHAR(255)`);
    await queryRunner.query(
      `CREATE INDEX idx_agent_tasks_forked_from ON agent_tasks (forked_from, created_at DESC, id DESC) WHERE forked_from IS NOT NULL`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX idx_agent_tasks_forked_from`);
    await queryRunner.query(`ALTER TABLE agent_tasks DROP COLUMN forked_from_step`);
    await queryRunner.query(`ALTER TABLE agent_tasks DROP COLUMN forked_from`);
    await queryRunner.query(`ALTER TABLE agent_tasks DROP COLUMN history`);
  }
}
