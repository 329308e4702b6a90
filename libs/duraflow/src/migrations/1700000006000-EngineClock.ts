import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The engine's clock in SQL: every statement that decides by time (a task due, a sleep over, a
 * signal wait's deadline, a rate-limit window, retention's cutoff) reads `duraflow_now()` (the
 * transaction's time, as `now()`) or `duraflow_clock_timestamp()` (the statement's, as
 * `clock_timestamp()`) instead of PostgreSQL's own. In production they are exactly those: a
 * one-line SQL function, STABLE (the first) and not SECURITY DEFINER, is inlined by the planner,
 * so a plan and its index use are the same as with `now()`. The testing kit
 * (`@duraflow/nestjs/testing`) redefines both in its own test database to add its virtual
 * clock's offset. Leases, heartbeats and leader leases keep PostgreSQL's real clock.
 */
export class EngineClock1700000006000 implements MigrationInterface {
  name = 'EngineClock1700000006000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE OR REPLACE FUNCTION duraflow_now() RETURNS timestamptz LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT now()'`,
    );
    await queryRunner.query(
      `CREATE OR REPLACE FUNCTION duraflow_clock_timestamp() RETURNS timestamptz LANGUAGE sql VOLATILE PARALLEL SAFE AS 'SELECT clock_timestamp()'`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP FUNCTION IF EXISTS duraflow_clock_timestamp()`);
    await queryRunner.query(`DROP FUNCTION IF EXISTS duraflow_now()`);
  }
}
