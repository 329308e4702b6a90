import { OnApplicationShutdown } from '@nestjs/common';
import { Pool } from 'pg';

/**
 * The tables where chaos workflows record their side effects, written past the library with
 * a plain pg Pool: what a step body or a compensation really did, even when its checkpoint
 * never landed because the process died. The test creates them in its own database.
 */
export const CHAOS_TABLES_SQL = `
  CREATE TABLE chaos_effects (
    id bigserial PRIMARY KEY,
    task_id uuid NOT NULL,
    step_key text NOT NULL,
    worker_id text NOT NULL,
    pid int NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
  );
  CREATE TABLE chaos_compensations (
    id bigserial PRIMARY KEY,
    task_id uuid NOT NULL,
    step_key text NOT NULL,
    output jsonb,
    worker_id text NOT NULL,
    pid int NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
  );
`;

/**
 * Records side effects into the chaos tables, tagged with this process's worker id and pid.
 * Provided by value (`{ provide: ChaosEffects, useValue }`), injected by its class.
 */
export class ChaosEffects implements OnApplicationShutdown {
  private readonly pool: Pool;

  constructor(
    databaseUrl: string,
    readonly workerId: string,
  ) {
    this.pool = new Pool({ connectionString: databaseUrl, max: 4 });
    // An idle client losing its server (the database dropped at teardown) must not crash the process.
    this.pool.on('error', (error) => console.error(`[chaos-effects] idle client error: ${error.message}`));
  }

  async recordEffect(taskId: string, stepKey: string): Promise<void> {
    await this.pool.query(`INSERT INTO chaos_effects (task_id, step_key, worker_id, pid) VALUES ($1, $2, $3, $4)`, [
      taskId,
      stepKey,
      this.workerId,
      process.pid,
    ]);
  }

  async recordCompensation(taskId: string, stepKey: string, output: unknown): Promise<void> {
    await this.pool.query(
      `INSERT INTO chaos_compensations (task_id, step_key, output, worker_id, pid) VALUES ($1, $2, $3::jsonb, $4, $5)`,
      [taskId, stepKey, JSON.stringify(output ?? null), this.workerId, process.pid],
    );
  }

  async onApplicationShutdown(): Promise<void> {
    await this.pool.end();
  }
}
