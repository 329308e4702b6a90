import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * OpenTelemetry (issue 18): the W3C trace context that was active when a task was submitted,
 * so the process that runs it continues that trace. Only adds a nullable column: nothing of the
 * base schema changes.
 */
export class TraceContext1700000000300 implements MigrationInterface {
  name = 'TraceContext1700000000300';

  async up(queryRunner: QueryRunner): Promise<void> {
    // `{ "traceparent": "00-…", "tracestate": "…" }` as the propagation API wrote it; NULL when
    // nothing was traced at submit (no OpenTelemetry installed, no tracer configured, no span active).
    await queryRunner.query(`ALTER TABLE agent_tasks ADD COLUMN trace_context JSONB`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE agent_tasks DROP COLUMN trace_context`);
  }
}
