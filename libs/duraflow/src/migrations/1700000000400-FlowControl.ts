import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Flow control (concurrency limits, per-key fairness, rate limits), enforced in the claim. Like
 * the engine's other migrations it only adds: a nullable column, two partial indexes and two
 * tables of its own; nothing of the base schema is changed or dropped.
 */
export class FlowControl1700000000400 implements MigrationInterface {
  name = 'FlowControl1700000000400';

  async up(queryRunner: QueryRunner): Promise<void> {
    // Computed at submit: null for a workflow without flow control, '' for one without a key
    // function, else the task's key (tenant, account...). Only limited tasks have it, so the
    // partial indexes below hold no row of an unlimited workflow and cost its tasks nothing.
    await queryRunner.query(`ALTER TABLE agent_tasks ADD COLUMN concurrency_key VARCHAR(255)`);

    // The limited claim walks the keys of a workflow in order (one probe per key) and each key's
    // pending tasks in the claim order, so its cost follows the batch, not the backlog.
    await queryRunner.query(`
      CREATE INDEX idx_agent_tasks_flow_pending
      ON agent_tasks(workflow_name, concurrency_key, priority DESC, created_at, id)
      WHERE status = 'pending' AND concurrency_key IS NOT NULL`);

    // Slots are counted from running tasks: per workflow and per key, over running rows only.
    await queryRunner.query(`
      CREATE INDEX idx_agent_tasks_flow_running
      ON agent_tasks(workflow_name, concurrency_key)
      WHERE status = 'running' AND concurrency_key IS NOT NULL`);

    // One row per limited workflow, written by the workers that register it: its limits (what
    // `duraflow status` reports against) and where its round-robin over keys stopped.
    await queryRunner.query(`
      CREATE TABLE flow_limits (
        workflow_name VARCHAR(255) PRIMARY KEY,
        concurrency INTEGER,
        keyed BOOLEAN NOT NULL DEFAULT false,
        key_concurrency INTEGER,
        rate_limit INTEGER,
        rate_period_ms INTEGER,
        rate_per_key BOOLEAN NOT NULL DEFAULT false,
        key_cursor VARCHAR(255),
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
      )`);

    // The starts of rate-limited workflows within their window ('' as rate_key for a limit of
    // the whole workflow), written by the claim that starts them; older ones are pruned by it.
    await queryRunner.query(`
      CREATE TABLE flow_starts (
        workflow_name VARCHAR(255) NOT NULL,
        rate_key VARCHAR(255) NOT NULL,
        started_at TIMESTAMPTZ NOT NULL
      )`);
    await queryRunner.query(`CREATE INDEX idx_flow_starts_window ON flow_starts(workflow_name, rate_key, started_at)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE flow_starts`);
    await queryRunner.query(`DROP TABLE flow_limits`);
    await queryRunner.query(`DROP INDEX idx_agent_tasks_flow_running`);
    await queryRunner.query(`DROP INDEX idx_agent_tasks_flow_pending`);
    await queryRunner.query(`ALTER TABLE agent_tasks DROP COLUMN concurrency_key`);
  }
}
