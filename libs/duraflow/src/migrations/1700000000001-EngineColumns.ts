import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What the engine needs beyond the base schema (SeedSchema). It only adds (nullable columns and indexes);
 * no column, default or index of the base schema is changed or dropped.
 */
export class EngineColumns1700000000001 implements MigrationInterface {
  name = 'EngineColumns1700000000001';

  async up(queryRunner: QueryRunner): Promise<void> {
    // Submitting twice with one key returns the first task: the unique index is the arbiter,
    // so concurrent submits (and a submit inside a caller's transaction) stay exactly-once.
    await queryRunner.query(`ALTER TABLE agent_tasks ADD COLUMN idempotency_key VARCHAR(255)`);
    await queryRunner.query(`
      CREATE UNIQUE INDEX idx_agent_tasks_idempotency
      ON agent_tasks(workflow_name, idempotency_key)
      WHERE idempotency_key IS NOT NULL`);

    // The fencing token: a new value on every claim. A worker's writes for a task carry it,
    // so a worker that lost the task (reaped, cancelled, handed back) changes nothing.
    await queryRunner.query(`ALTER TABLE agent_tasks ADD COLUMN claim_token UUID`);

    // The claim reads pending rows in exactly this order; with the order in the index the
    // plan has no sort node, whatever the queue depth (the base schema's index leads with scheduled_at).
    await queryRunner.query(`
      CREATE INDEX idx_agent_tasks_claim
      ON agent_tasks(priority DESC, created_at, id)
      WHERE status = 'pending'`);

    // Newest-first listings page on the keyset (created_at, id), optionally narrowed by status.
    await queryRunner.query(`CREATE INDEX idx_agent_tasks_created ON agent_tasks(created_at DESC, id DESC)`);
    await queryRunner.query(`
      CREATE INDEX idx_agent_tasks_status_created
      ON agent_tasks(status, created_at DESC, id DESC)`);

    // The position of a step in the order its run's steps completed (1, 2, ...), for a LIFO
    // rollback that does not depend on clock resolution.
    await queryRunner.query(`ALTER TABLE step_runs ADD COLUMN completion_seq INTEGER`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE step_runs DROP COLUMN completion_seq`);
    await queryRunner.query(`DROP INDEX idx_agent_tasks_status_created`);
    await queryRunner.query(`DROP INDEX idx_agent_tasks_created`);
    await queryRunner.query(`DROP INDEX idx_agent_tasks_claim`);
    await queryRunner.query(`ALTER TABLE agent_tasks DROP COLUMN claim_token`);
    await queryRunner.query(`DROP INDEX idx_agent_tasks_idempotency`);
    await queryRunner.query(`ALTER TABLE agent_tasks DROP COLUMN idempotency_key`);
  }
}
