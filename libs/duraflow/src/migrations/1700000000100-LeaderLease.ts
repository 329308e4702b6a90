import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The reaper's leadership as a lease row (issue 14): a leader renews `expires_at` by
 * compare-and-set on (holder, term); another node takes an expired row with term + 1; the
 * reap statement locks the row FOR SHARE and checks holder, term and expiry in the same
 * statement, so a leader that wakes after losing its lease reaps nothing. A new table: the
 * seed schema is not touched.
 */
export class LeaderLease1700000000100 implements MigrationInterface {
  name = 'LeaderLease1700000000100';

  async up(queryRunner: QueryRunner): Promise<void> {
    // One row per leader key (reaper.leaderKey); the term only grows (release expires the row
    // rather than deleting it), so a term once lost is never valid again. holder_pid is the
    // backend of the holder's election connection: once that session is gone (the process
    // died), the lease is taken at once instead of at its expiry.
    await queryRunner.query(
      `CREATE TABLE duraflow_leader (
         name VARCHAR(255) PRIMARY KEY,
         holder VARCHAR(255) NOT NULL,
         term BIGINT NOT NULL,
         expires_at TIMESTAMPTZ NOT NULL,
         acquired_at TIMESTAMPTZ NOT NULL DEFAULT now(),
         holder_pid INT
       )`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE duraflow_leader`);
  }
}
