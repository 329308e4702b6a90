import { Logger } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import {
  DuraflowModuleOptions,
  SagaService,
  TaskStatus,
  WorkerService,
  workflow,
  WorkflowContext,
  WorkflowService,
} from '@duraflow/nestjs';
import { Client } from 'pg';
import { PgBouncer } from './support/pgbouncer';
import { PrivatePostgres } from './support/private-postgres';
import { runToEnd } from './support/run-to-end';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/** The user's side effects: what each step and compensation did, per task. */
const effects: string[] = [];
let refundFails = true;

const order = workflow('pooled-order', async (ctx: WorkflowContext<{ items: number; failAtEnd?: boolean }>) => {
  const reserved = await ctx.step.run('reserve', () => {
    effects.push(`${ctx.runId}:reserve`);
    return { items: ctx.input.items };
  });
  const charged = await ctx.step.run('charge', () => {
    effects.push(`${ctx.runId}:charge`);
    return { amount: reserved.items * 10 };
  });
  await ctx.step.run('ship', () => {
    effects.push(`${ctx.runId}:ship`);
    if (ctx.input.failAtEnd) throw new Error('the carrier refused the parcel');
    return { parcel: `P-${charged.amount}` };
  });
  return { shipped: true };
});

const pooledOrder = workflow('pooled-saga', order.run, {
  compensation: { retries: 0 },
  compensations: {
    reserve: (_output, ctx) => {
      effects.push(`${ctx.runId}:release`);
    },
    charge: (_output, ctx) => {
      if (refundFails) throw new Error('the bank is closed');
      effects.push(`${ctx.runId}:refund`);
    },
  },
});

describe('behind pgbouncer in transaction mode', () => {
  const bed = useTestBed();
  let bouncer: PgBouncer;

  beforeAll(async () => {
    bouncer = await PgBouncer.start({ poolSize: 2 });
  });

  afterAll(async () => {
    await bouncer?.stop();
  });

  beforeEach(() => {
    effects.length = 0;
    refundFails = true;
  });

  function startPooledApp(duraflow: DuraflowModuleOptions): Promise<TestingModule> {
    return bed.start({
      databaseUrl: bouncer.url(bed.db.name),
      duraflow: { pooler: 'pgbouncer-transaction', workflows: [order, pooledOrder], worker: { concurrency: 10 }, ...duraflow },
    });
  }

  /** Runs tasks with steps, a saga rollback that dead-letters and a retry of that dead letter, all through the pooler. */
  async function runEverything(app: TestingModule): Promise<void> {
    const workflows = app.get(WorkflowService);
    const submitted = await Promise.all(Array.from({ length: 30 }, (_, i) => workflows.submit('pooled-order', { items: i + 1 })));
    for (const task of submitted) {
      const done = await workflows.waitFor(task.id, { timeoutMs: 30_000 });
      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(effects.filter((effect) => effect.startsWith(`${task.id}:`))).toEqual([
        `${task.id}:reserve`,
        `${task.id}:charge`,
        `${task.id}:ship`,
      ]);
    }
    expect(await bed.rows.count('step_runs', `status = 'completed' AND task_id = ANY($1::uuid[])`, [submitted.map((t) => t.id)])).toBe(90);

    const saga = await runToEnd(app, 'pooled-saga', { items: 2, failAtEnd: true });
    expect(saga.status).toBe(TaskStatus.PARTIAL_ROLLBACK);
    expect(effects.filter((effect) => effect.startsWith(`${saga.id}:`))).toEqual([
      `${saga.id}:reserve`,
      `${saga.id}:charge`,
      `${saga.id}:ship`,
      `${saga.id}:release`,
    ]);
    const [entry] = await bed.rows.deadLetters(saga.id);
    expect(entry.step_key).toBe('charge');

    refundFails = false;
    const retried = await app.get(SagaService).retryDeadLetter(entry.id);
    expect(retried.outcome).toBe('compensated');
    expect(retried.task?.status).toBe(TaskStatus.ROLLED_BACK);
    expect(effects).toContain(`${saga.id}:refund`);
    expect(await bed.rows.count('dead_letter_queue', 'task_id = $1', [saga.id])).toBe(0);
    expect((await bed.rows.task(saga.id)).status).toBe('rolled_back');
  }

  it('runs steps, a rollback and a dead-letter retry without listenUrl, polling instead of LISTEN and saying so at boot', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn');
    const app = await startPooledApp({});
    expect(warn.mock.calls.filter(([message]) => String(message).includes('without listenUrl'))).toHaveLength(1);
    warn.mockRestore();
    await runEverything(app);
    expect(app.get(WorkerService).stats().listening).toBe(false);
    // Nothing LISTENs on the database: no session went around the pooler.
    const { rows } = await bed.db.client.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND query LIKE 'LISTEN%'`,
      [bed.db.name],
    );
    expect(rows[0].n).toBe(0);
  });

  it('runs the same with listenUrl, woken by NOTIFY on a direct LISTEN connection', async () => {
    const app = await startPooledApp({ listenUrl: bed.db.url });
    await eventually('LISTEN is up', () => app.get(WorkerService).stats().listening);
    await runEverything(app);
    const { rows } = await bed.db.client.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND query LIKE 'LISTEN%'`,
      [bed.db.name],
    );
    expect(rows[0].n).toBe(1);
  });
});

describe('the tests’ pgbouncer', () => {
  it('logs in to the server it fronts as that server’s user, with its password (here a private PostgreSQL that asks for one)', async () => {
    const server = await PrivatePostgres.start();
    let bouncer: PgBouncer | undefined;
    try {
      bouncer = await PgBouncer.start({ serverUrl: server.url });
      const through = new Client({ connectionString: bouncer.url('postgres') });
      await through.connect();
      try {
        const { rows } = await through.query<{ port: number }>(`SELECT current_setting('port')::int AS port`);
        expect(rows[0].port).toBe(server.port);
      } finally {
        await through.end();
      }
    } finally {
      await bouncer?.stop();
      await server.destroy();
    }
  });
});
