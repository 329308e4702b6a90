import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The base schema that applications may already have (test/fixtures/schema holds its text and
 * test/schema.spec.ts checks it): the three tables with every column, default and constraint,
 * and its five indexes. Never edit this migration: databases made from it must stay valid;
 * what Duraflow needs beyond it lives in later migrations that only add.
 */
export class SeedSchema1700000000000 implements MigrationInterface {
  name = 'SeedSchema1700000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE agent_tasks (
        id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
        workflow_name VARCHAR(255) NOT NULL,
        status VARCHAR(50) NOT NULL DEFAULT 'pending',
        input JSONB DEFAULT '{}',
        output JSONB,
        error JSONB,
        priority INTEGER DEFAULT 0,
        scheduled_at TIMESTAMPTZ,
        started_at TIMESTAMPTZ,
        completed_at TIMESTAMPTZ,
        heartbeat_at TIMESTAMPTZ,
        worker_id VARCHAR(255),
        retry_count INTEGER DEFAULT 0,
        max_retries INTEGER DEFAULT 3,
        created_at TIMESTAMPTZ DEFAULT NOW(),
        updated_at TIMESTAMPTZ DEFAULT NOW(),
        deleted_at TIMESTAMPTZ
      )`);
    await queryRunner.query(`
      CREATE INDEX idx_agent_tasks_status_scheduled_priority
      ON agent_tasks(status, scheduled_at, priority DESC)
      WHERE status = 'pending'`);
    await queryRunner.query(`
      CREATE INDEX idx_agent_tasks_heartbeat
      ON agent_tasks(heartbeat_at)
      WHERE status = 'running'`);

    await queryRunner.query(`
      CREATE TABLE step_runs (
        id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
        task_id UUID NOT NULL REFERENCES agent_tasks(id) ON DELETE CASCADE,
        step_key VARCHAR(255) NOT NULL,
        status VARCHAR(50) NOT NULL DEFAULT 'pending',
        input JSONB,
        output JSONB,
        error JSONB,
        compensation_fn TEXT,
        compensated_at TIMESTAMPTZ,
        started_at TIMESTAMPTZ,
        completed_at TIMESTAMPTZ,
        created_at TIMESTAMPTZ DEFAULT NOW(),
        attempt INTEGER DEFAULT 0,
        UNIQUE(task_id, step_key)
      )`);
    await queryRunner.query(`
      CREATE UNIQUE INDEX idx_step_runs_task_step
      ON step_runs(task_id, step_key)`);
    await queryRunner.query(`
      CREATE INDEX idx_step_runs_compensation
      ON step_runs(task_id)
      WHERE compensation_fn IS NOT NULL`);

    await queryRunner.query(`
      CREATE TABLE dead_letter_queue (
        id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
        task_id UUID NOT NULL,
        step_id UUID NOT NULL,
        error JSONB,
        retry_count INTEGER DEFAULT 0,
        created_at TIMESTAMPTZ DEFAULT NOW()
      )`);
    await queryRunner.query(`CREATE INDEX idx_dlq_task_id ON dead_letter_queue(task_id)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE dead_letter_queue`);
    await queryRunner.query(`DROP TABLE step_runs`);
    await queryRunner.query(`DROP TABLE agent_tasks`);
  }
}
