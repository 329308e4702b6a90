import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What the saga needs beyond the base schema (SeedSchema). Like the previous engine migration it only adds:
 * no column, default or index of the base schema is changed or dropped.
 */
export class SagaColumns1700000000002 implements MigrationInterface {
  name = 'SagaColumns1700000000002';

  async up(queryRunner: QueryRunner): Promise<void> {
    // Set when a rollback starts ('failed': a step failed for good, or the reaper gave up;
    // 'cancelled': cancel(id, { compensate: true })). A task that is claimed again with it set
    // resumes its rollback instead of running its workflow, so a crash mid-rollback neither
    // loses the rollback nor re-runs the step that failed.
    await queryRunner.query(`ALTER TABLE agent_tasks ADD COLUMN rollback_reason VARCHAR(20)`);

    // At most one open dead letter per step: a compensation that failed for good is written
    // once, whoever (worker or reaper) gets there, and a resumed rollback skips it. A table
    // filled before Duraflow (the base schema allows several rows per step) must have its duplicates
    // resolved first: the index then fails with a unique violation naming one, and nothing is
    // deleted on the user's behalf.
    await queryRunner.query(`CREATE UNIQUE INDEX idx_dlq_step_id ON dead_letter_queue(step_id)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX idx_dlq_step_id`);
    await queryRunner.query(`ALTER TABLE agent_tasks DROP COLUMN rollback_reason`);
  }
}
