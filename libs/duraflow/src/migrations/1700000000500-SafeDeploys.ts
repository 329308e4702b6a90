import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What safe deploys (versions, the determinism guard) need beyond the base schema. Like the
 * other engine migrations it only adds nullable columns: no column, default or index of the
 * base schema is changed.
 */
export class SafeDeploys1700000000500 implements MigrationInterface {
  name = 'SafeDeploys1700000000500';

  async up(queryRunner: QueryRunner): Promise<void> {
    // The version of its workflow a task started on, for good. NULL: the workflow declared no
    // version when the task was submitted (every task older than this migration), which is
    // version 1: a worker claims a task only while it registers the task's (name, version).
    await queryRunner.query(`ALTER TABLE agent_tasks ADD COLUMN workflow_version INTEGER`);

    // Set while the determinism guard holds the task: it is `pending` (nothing runs it, nothing
    // rolls it back) and the claim passes it over until workflows.resume(id) clears it. Its
    // NonDeterminismError is in `error`.
    await queryRunner.query(`ALTER TABLE agent_tasks ADD COLUMN held_at TIMESTAMPTZ`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE agent_tasks DROP COLUMN held_at`);
    await queryRunner.query(`ALTER TABLE agent_tasks DROP COLUMN workflow_version`);
  }
}
