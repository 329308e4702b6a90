import { BenchContext, rawSection } from '../context';
import { pgbench } from '../pgbench';
import { progress } from '../stats';

export const INSERT_SCRIPT = 'INSERT INTO bench_ref(v) VALUES (1);';

/** The shape of Duraflow's submit and completion: a write that notifies, in one statement. */
export const INSERT_NOTIFY_SCRIPT = `WITH inserted AS (INSERT INTO bench_ref(v) VALUES (1) RETURNING id)
SELECT pg_notify('bench_ref_channel', id::text) FROM inserted;`;

/** Claims the oldest unclaimed row and marks it done, one row per transaction: the floor of any SKIP LOCKED queue. */
export const SKIP_LOCKED_SCRIPT = `UPDATE bench_queue SET done = true
WHERE id = (SELECT id FROM bench_queue WHERE NOT done ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED);`;

/** The physical reference: one-row INSERT commits at 1 and 4 clients, and a minimal SKIP LOCKED claim at 4. */
export async function referenceScenario(ctx: BenchContext): Promise<void> {
  const { client, url } = ctx.db;
  const seconds = ctx.sizes.pgbenchSeconds;
  await client.query('CREATE TABLE bench_ref (id bigserial PRIMARY KEY, v int)');
  const raw = rawSection(ctx, 'reference');
  try {
    for (const clients of [1, 4]) {
      progress(`pgbench one-row INSERT, ${clients} client(s), ${seconds} s`);
      const result = await pgbench(url, INSERT_SCRIPT, clients, seconds);
      raw[`insert_c${clients}`] = result;
      ctx.results.set(`ref.insert.c${clients}`, result.tps, `${result.command}; avg latency ${result.latencyMs} ms`);
    }
    progress(`pgbench one-row INSERT + pg_notify, 4 clients, ${seconds} s`);
    const notify = await pgbench(url, INSERT_NOTIFY_SCRIPT, 4, seconds);
    raw.insert_notify_c4 = notify;
    ctx.results.set(
      'ref.notify.c4',
      notify.tps,
      `WITH … INSERT … RETURNING SELECT pg_notify(…): notifying commits are serialized by PostgreSQL`,
    );
  } finally {
    await client.query('DROP TABLE bench_ref');
  }

  progress(`pgbench SKIP LOCKED claim, 4 clients, ${seconds} s (${ctx.sizes.skipLockedRows} rows queued)`);
  await client.query(`CREATE TABLE bench_queue (id bigserial PRIMARY KEY, done boolean NOT NULL DEFAULT false)`);
  try {
    await client.query(`CREATE INDEX bench_queue_todo ON bench_queue (id) WHERE NOT done`);
    await client.query(`INSERT INTO bench_queue (done) SELECT false FROM generate_series(1, $1::int)`, [ctx.sizes.skipLockedRows]);
    await client.query('VACUUM ANALYZE bench_queue');
    const result = await pgbench(url, SKIP_LOCKED_SCRIPT, 4, seconds);
    const { rows } = await client.query<{ left: string }>('SELECT count(*) AS left FROM bench_queue WHERE NOT done');
    const left = Number(rows[0].left);
    raw.skip_locked_c4 = { ...result, rowsLeft: left };
    if (left === 0) throw new Error(`the SKIP LOCKED reference ran out of rows (${ctx.sizes.skipLockedRows}): raise skipLockedRows`);
    ctx.results.set(
      'ref.skiplocked.c4',
      result.tps,
      `UPDATE … WHERE id = (SELECT … ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED), partial index`,
    );
  } finally {
    await client.query('DROP TABLE bench_queue');
  }
}

/** The 1-client INSERT again, at the end: how much the machine drifted during the run. */
export async function referenceAgainScenario(ctx: BenchContext): Promise<void> {
  const { client, url } = ctx.db;
  await client.query('CREATE TABLE bench_ref (id bigserial PRIMARY KEY, v int)');
  try {
    progress(`pgbench one-row INSERT, 1 client, ${ctx.sizes.pgbenchSeconds} s (again)`);
    const result = await pgbench(url, INSERT_SCRIPT, 1, ctx.sizes.pgbenchSeconds);
    rawSection(ctx, 'reference').insert_c1_end = result;
    const first = ctx.results.get('ref.insert.c1');
    const drift = typeof first === 'number' ? ` (${formatDrift(result.tps / first)} of the first run)` : '';
    ctx.results.set('ref.insert.c1.end', result.tps, `drift check${drift}`);
  } finally {
    await client.query('DROP TABLE bench_ref');
  }
}

function formatDrift(ratio: number): string {
  return `${Math.round(ratio * 100)}%`;
}
