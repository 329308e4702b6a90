import { Client } from 'pg';
import { TaskStatus, WorkerService, workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { useTestBed } from './support/test-bed';
import { sleep } from './support/waiting';

/**
 * Every statement this process's pg clients send (the pool's and the dedicated sessions': LISTEN,
 * the leader's lock), counted by wrapping `Client.prototype.query`, except those of `ignored`.
 */
class StatementCounter {
  count = 0;
  readonly texts: string[] = [];
  private readonly original = Client.prototype.query;

  constructor(ignored: Client) {
    const original = this.original;
    const record = (text: string) => {
      this.count++;
      this.texts.push(text);
    };
    Client.prototype.query = function (this: Client, ...args: unknown[]) {
      if (this !== ignored) {
        const first = args[0] as string | { text?: string };
        record((typeof first === 'string' ? first : (first?.text ?? '')).replace(/\s+/g, ' ').slice(0, 60));
      }
      return (original as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof Client.prototype.query;
  }

  restore(): void {
    Client.prototype.query = this.original;
  }
}

const noop = workflow('idle-noop', async (ctx: WorkflowContext) => {
  await ctx.step.run('only', () => 'done');
  return 'ok';
});

/**
 * The defaults scaled down ten times (poll 50 ms backing off to 3 s, reaper every 1 s, stale
 * after 3 s, leader ttl 3 s): 12 statements a minute at the defaults are 12 per 6 s here.
 */
const TEN_TIMES_FASTER = {
  worker: { pollIntervalMs: 50, maxIdlePollIntervalMs: 3_000 },
  reaper: { intervalMs: 1_000, staleAfterMs: 3_000, leaderTtlMs: 3_000 },
  heartbeatIntervalMs: 500,
  workflows: [noop],
};

describe('an idle node', () => {
  const bed = useTestBed({ databasePerTest: true });
  let counter: StatementCounter | undefined;

  afterEach(() => counter?.restore());

  it('sends at most 12 statements per (scaled) minute once backed off: poll, reaper and leader together', async () => {
    const app = await bed.start({ duraflow: TEN_TIMES_FASTER });
    await app.get(WorkerService).start();
    // The backoff reaches its ceiling (50 ms doubled up to 3 s) and the reaper goes quiet.
    await sleep(8_000);
    counter = new StatementCounter(bed.db.client);
    await sleep(6_000);
    const sent = counter.count;
    counter.restore();
    console.log(`idle node, scaled defaults: ${sent} statements in 6 s (a scaled minute): ${JSON.stringify(counter.texts)}`);
    // Without the backoff the poll alone would send 120 (one per 50 ms).
    expect(sent).toBeLessThanOrEqual(12);
    expect(sent).toBeGreaterThan(0);
  });

  it('still starts a submitted task at once: the NOTIFY wakes the backed-off worker', async () => {
    const app = await bed.start({ duraflow: { ...TEN_TIMES_FASTER, worker: { pollIntervalMs: 50, maxIdlePollIntervalMs: 120_000 } } });
    await app.get(WorkerService).start();
    await sleep(4_000);
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('idle-noop', {});
    // Far below the 120 s the backed-off poll could wait: only the NOTIFY can have started it.
    const done = await workflows.waitFor(task.id, { timeoutMs: 20_000 });
    expect(done.status).toBe(TaskStatus.COMPLETED);
  });

  it('claims a scheduled task once it is due, within the idle ceiling', async () => {
    const app = await bed.start({ duraflow: TEN_TIMES_FASTER });
    await app.get(WorkerService).start();
    await sleep(4_000);
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('idle-noop', {}, { scheduledAt: new Date(Date.now() + 2_000) });
    expect((await bed.rows.task(task.id)).status).toBe('pending');
    const done = await workflows.waitFor(task.id, { timeoutMs: 20_000 });
    expect(done.status).toBe(TaskStatus.COMPLETED);
  });

  it('still recovers the task of a dead worker while the cluster is quiet, within twice staleAfterMs', async () => {
    const app = await bed.start({ duraflow: TEN_TIMES_FASTER });
    await app.get(WorkerService).start();
    // Quiet: the reaper's passes found nothing and no NOTIFY was heard since.
    await sleep(6_000);
    const { rows } = await bed.db.client.query<{ id: string }>(
      `INSERT INTO agent_tasks (workflow_name, status, worker_id, claim_token, started_at, heartbeat_at)
       VALUES ('idle-noop', 'running', 'a-dead-worker', gen_random_uuid(), now(), now() - interval '60 seconds') RETURNING id`,
    );
    const done = await app.get(WorkflowService).waitFor(rows[0].id, { timeoutMs: 20_000 });
    expect(done.status).toBe(TaskStatus.COMPLETED);
    expect(done.retryCount).toBe(1);
  });

  it('polls at its interval again, without backing off, when LISTEN is lost', async () => {
    const app = await bed.start({ duraflow: { ...TEN_TIMES_FASTER, worker: { pollIntervalMs: 100, maxIdlePollIntervalMs: 120_000 } } });
    await app.get(WorkerService).start();
    // Backed off: the poll now scheduled comes at 25.5 s (0.1 s doubled: 0.1 + 0.2 + ... + 12.8).
    await sleep(14_000);
    // The LISTEN session dies; the reconnect waits a while, and until then the poll is all there is.
    await bed.db.client.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'`,
    );
    const { rows } = await bed.db.client.query<{ id: string }>(
      `INSERT INTO agent_tasks (workflow_name, status) VALUES ('idle-noop', 'pending') RETURNING id`,
    );
    // Nothing announced this task; the backed-off poll would come 11 s from now.
    const done = await app.get(WorkflowService).waitFor(rows[0].id, { timeoutMs: 6_000 });
    expect(done.status).toBe(TaskStatus.COMPLETED);
  });
});
