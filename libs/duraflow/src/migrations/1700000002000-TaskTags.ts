import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Tags (`submit(..., { tags })`): a task's string keys and values as a jsonb object, `{}` when it
 * has none (a constant default: adding the column rewrites no row). A GIN index with
 * jsonb_path_ops serves the AND filter `tags @> '{"tenant":"acme"}'` of list, count and the bulk
 * operations, so finding a customer's tasks reads no other rows.
 */
export class TaskTags1700000002000 implements MigrationInterface {
  name = 'TaskTags1700000002000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE agent_tasks ADD COLUMN tags JSONB NOT NULL DEFAULT '{}'::jsonb`);
    await queryRunner.query(`CREATE INDEX idx_agent_tasks_tags ON agent_tasks USING GIN (tags jsonb_path_ops)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX idx_agent_tasks_tags`);
    await queryRunner.query(`ALTER TABLE agent_tasks DROP COLUMN tags`);
  }
}
