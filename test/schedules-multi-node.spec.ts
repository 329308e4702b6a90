import { TestingModule } from '@nestjs/testing';
import { Client } from 'pg';
import { DuraflowModuleOptions, ScheduleDefinition, workflow } from '@duraflow/nestjs';
import { useChaosBed } from './fixtures/chaos/chaos-bed';
import { useTestBed } from './support/test-bed';
import { eventually, sleep } from './support/waiting';
import { withWorkerOutputOnFailure, WorkerProcess } from './support/worker-process';

/** Every tick that has a task: its time, its tasks, its tick rows, and whether its tick row names its task. */
async function ticksOf(client: Client, scheduleName: string) {
  const { rows } = await client.query<{ tick: string; tasks: number; rows: number; row_names_task: boolean }>(
    `WITH scheduled AS (
       SELECT substr(idempotency_key, length($1) + 1, 24) AS tick, id FROM agent_tasks WHERE idempotency_key LIKE $1 || '%'
     )
     SELECT tick, count(*)::int AS tasks,
            (SELECT count(*)::int FROM duraflow_schedule_ticks k WHERE k.schedule_name = $2 AND k.tick_at = tick::timestamptz) AS rows,
            bool_and(EXISTS (SELECT 1 FROM duraflow_schedule_ticks k WHERE k.schedule_name = $2 AND k.task_id = scheduled.id)) AS row_names_task
     FROM scheduled GROUP BY tick ORDER BY tick`,
    [`schedule:${scheduleName}:`, scheduleName],
  );
  return rows;
}

/** One task and one tick row per tick, no tick row without its task, and every second from the first tick to the last one. */
async function expectOneTaskPerSecond(client: Client, scheduleName: string): Promise<number> {
  const ticks = await ticksOf(client, scheduleName);
  expect(ticks.filter((tick) => tick.tasks !== 1 || tick.rows !== 1 || !tick.row_names_task)).toEqual([]);
  const { rows } = await client.query(`SELECT count(*)::int AS n FROM duraflow_schedule_ticks WHERE schedule_name = $1`, [scheduleName]);
  expect(rows[0].n).toBe(ticks.length);
  const seconds = ticks.map((tick) => Date.parse(tick.tick) / 1000);
  const gaps = seconds.slice(1).filter((second, i) => second - seconds[i] !== 1);
  expect(gaps).toEqual([]);
  return ticks.length;
}

const EVERY_SECOND: ScheduleDefinition = {
  name: 'every-second',
  workflow: 'scheduled-noop',
  cron: '* * * * * *',
  // A node that stalls past a tick (two cores shared by many tests) still starts it.
  catchUp: 'all',
};

describe('schedules on several nodes', () => {
  describe('three Nest apps on one database', () => {
    const bed = useTestBed();
    const noop = workflow('scheduled-noop', async () => ({ ok: true }));
    const options: DuraflowModuleOptions = { workflows: [noop], schedules: [EVERY_SECOND] };

    it('start one task per tick between them, and go on ticking as the apps stop one by one', async () => {
      const apps: TestingModule[] = [];
      for (let i = 0; i < 3; i++) apps.push(await bed.start({ duraflow: options }));
      const ticked = async (count: number) =>
        eventually(`${count} ticks have started a task`, async () => (await ticksOf(bed.db.client, 'every-second')).length >= count);

      await ticked(4);
      await bed.close(apps[0]);
      const afterFirst = (await ticksOf(bed.db.client, 'every-second')).length;
      await ticked(afterFirst + 3);
      await bed.close(apps[1]);
      const afterSecond = (await ticksOf(bed.db.client, 'every-second')).length;
      await ticked(afterSecond + 3);
      await bed.close(apps[2]);

      expect(await expectOneTaskPerSecond(bed.db.client, 'every-second')).toBeGreaterThanOrEqual(10);
    });
  });

  describe('a node that dies holding a tick', () => {
    const bed = useTestBed();
    const noop = workflow('scheduled-noop', async () => ({ ok: true }));

    it('starts the tick on another node once the dead node’s transaction is gone, and goes on ticking', async () => {
      await bed.start({ duraflow: { workflows: [noop], schedules: [EVERY_SECOND] } });
      // The dead node: a session that wrote the tick's row and never committed (its process froze, then died).
      const dead = new Client({ connectionString: bed.db.url });
      dead.on('error', () => undefined);
      await dead.connect();
      const tick = new Date(Math.ceil(Date.now() / 1000) * 1000 + 2000);
      await dead.query('BEGIN');
      await dead.query(`INSERT INTO duraflow_schedule_ticks (schedule_name, tick_at) VALUES ($1, $2)`, [EVERY_SECOND.name, tick]);
      const { rows: deadSession } = await dead.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');

      await eventually('the live node waits for the dead node’s tick row', async () => {
        const { rows } = await bed.db.client.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        );
        return rows[0].n > 0;
      });
      await sleep(Math.max(0, tick.getTime() + 1_500 - Date.now()));
      const key = `schedule:${EVERY_SECOND.name}:${tick.toISOString()}`;
      expect(await bed.rows.count('agent_tasks', 'idempotency_key = $1', [key])).toBe(0);

      await bed.db.client.query('SELECT pg_terminate_backend($1)', [deadSession[0].pid]);
      await eventually('the tick has its task', async () => (await bed.rows.count('agent_tasks', 'idempotency_key = $1', [key])) === 1);
      const after = (await ticksOf(bed.db.client, EVERY_SECOND.name)).length;
      await eventually(
        'two later ticks have their tasks',
        async () => (await ticksOf(bed.db.client, EVERY_SECOND.name)).length >= after + 2,
      );
      await dead.end().catch(() => undefined);

      const { rows } = await bed.db.client.query(`SELECT task_id FROM duraflow_schedule_ticks WHERE schedule_name = $1 AND tick_at = $2`, [
        EVERY_SECOND.name,
        tick,
      ]);
      const [task] = await bed.db.client.query(`SELECT id FROM agent_tasks WHERE idempotency_key = $1`, [key]).then((r) => r.rows);
      expect(rows).toEqual([{ task_id: task.id }]);
      await expectOneTaskPerSecond(bed.db.client, EVERY_SECOND.name);
    });
  });

  describe('worker processes killed while they tick', () => {
    const chaos = useChaosBed(['chaos-steps']);
    const schedule: ScheduleDefinition = {
      ...EVERY_SECOND,
      name: 'chaos-every-second',
      workflow: 'chaos-steps',
      input: { steps: 1, stepMs: 0 },
    };

    it(
      'lets another node start a tick whose row a frozen node holds, once PostgreSQL ends the frozen session',
      withWorkerOutputOnFailure(async () => {
        const client = chaos.db.client;
        const frozen = chaos.startWorker({ label: 'frozen', duraflow: { schedules: [schedule] } });
        await frozen.ready;
        await eventually('a tick has started a task', async () => (await ticksOf(client, schedule.name)).length > 0);

        // Make the frozen node's transaction stop right after it wrote the tick's row: hold the row
        // first, freeze the node while it waits for it, then let go.
        const holder = new Client({ connectionString: chaos.db.url });
        await holder.connect();
        const tick = new Date(Math.ceil(Date.now() / 1000) * 1000 + 2000);
        await holder.query('BEGIN');
        await holder.query(`INSERT INTO duraflow_schedule_ticks (schedule_name, tick_at) VALUES ($1, $2)`, [schedule.name, tick]);
        await eventually('the node waits for the held row', async () => {
          const { rows } = await client.query(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
               AND query LIKE 'INSERT INTO duraflow_schedule_ticks%' AND pid <> $1`,
            [(holder as unknown as { processID: number }).processID],
          );
          return rows[0].n > 0;
        });
        frozen.kill('SIGSTOP');
        await holder.query('ROLLBACK');
        await holder.end();
        const live = chaos.startWorker({ label: 'live', duraflow: { schedules: [schedule] } });
        await live.ready;
        const key = `schedule:${schedule.name}:${tick.toISOString()}`;
        await eventually(
          'the live node has started the frozen tick',
          async () => (await chaos.rows.count('agent_tasks', 'idempotency_key = $1', [key])) === 1,
        );

        frozen.kill('SIGCONT');
        const after = (await ticksOf(client, schedule.name)).length;
        await eventually('two more ticks have started a task', async () => (await ticksOf(client, schedule.name)).length >= after + 2);
        // Its session was ended under it: it lives on (the connection's error event is heard), and ticks again.
        expect(frozen.alive).toBe(true);
        expect(frozen.output.join('\n')).not.toContain('Uncaught exception');
        await Promise.all([frozen.stop(), live.stop()]);
        expect(await chaos.rows.count('agent_tasks', 'idempotency_key = $1', [key])).toBe(1);
        expect(frozen.output.join('\n')).toMatch(new RegExp(`Schedule "${schedule.name}" could not start its tick`));
        await expectOneTaskPerSecond(client, schedule.name);
      }),
      60_000,
    );

    it(
      'loses no tick and doubles none when a node is SIGKILLed at a tick, once another node runs',
      withWorkerOutputOnFailure(async () => {
        let started = 0;
        const startWorker = () => chaos.startWorker({ label: `S${++started}`, duraflow: { schedules: [schedule] } });
        const workers: WorkerProcess[] = [startWorker(), startWorker()];
        await Promise.all(workers.map((worker) => worker.ready));
        const tickCount = async () => (await ticksOf(chaos.db.client, schedule.name)).length;
        await eventually('three ticks have started a task', async () => (await tickCount()) >= 3);

        for (let round = 0; round < 4; round++) {
          // The older of the two dies a few milliseconds after a tick: mid-transaction, or just after.
          const victim = workers.shift()!;
          await sleep(1000 - (Date.now() % 1000) + (round % 3) * 2);
          victim.kill('SIGKILL');
          await victim.exited;
          const replacement = startWorker();
          workers.push(replacement);
          await replacement.ready;
          const before = await tickCount();
          await eventually('two more ticks have started a task', async () => (await tickCount()) >= before + 2);
        }

        // The tasks the killed workers held are recovered by the reaper and completed.
        await eventually(
          'every scheduled task is completed',
          async () => (await chaos.rows.count('agent_tasks', `status <> 'completed'`)) === 0,
          { timeoutMs: 30_000 },
        );
        await Promise.all(workers.map((worker) => worker.stop()));

        expect(await expectOneTaskPerSecond(chaos.db.client, schedule.name)).toBeGreaterThanOrEqual(11);
      }),
      120_000,
    );
  });
});
