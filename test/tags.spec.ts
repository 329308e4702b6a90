import { TestingModule } from '@nestjs/testing';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import {
  InvalidBulkFilterError,
  InvalidListOptionsError,
  InvalidSubmitOptionsError,
  TaskStatus,
  WorkflowContext,
  WorkflowService,
  workflow,
} from '@duraflow/nestjs';
import { clientExecutor, DuraflowDatabase } from '../libs/duraflow/src/persistence/duraflow-database';
import { TaskStore } from '../libs/duraflow/src/persistence/task.store';
import { useTestBed } from './support/test-bed';

/*
 * Tags (issue 29, DESIGN.md "Round 3"): submit(..., { tags }) checked before anything is written,
 * stored with the task, inherited by children (unless the child names its own) and kept by forks;
 * list, count and the bulk operations filter on them as an AND; and the list's tag filter is
 * served by idx_agent_tasks_tags (a bitmap scan of the GIN index), never a sequential scan.
 */

const WAIT = { timeoutMs: 30_000 };
const LATER = new Date(Date.now() + 24 * 3600_000);

const child = workflow('tags-child', async (ctx: WorkflowContext) => ctx.step.run('only', () => 1));
const one = workflow('tags-one', async (ctx: WorkflowContext) => ctx.step.run('only', () => 1));
const parent = workflow('tags-parent', async (ctx: WorkflowContext) => {
  const inherited = await ctx.startChild('inherits', 'tags-child', {});
  const own = await ctx.startChild('own', 'tags-child', {}, { tags: { tenant: 'globex' } });
  return { inherited: inherited.id, own: own.id };
});

describe('tags', () => {
  const bed = useTestBed();
  let app: TestingModule;
  let workflows: WorkflowService;

  beforeAll(async () => {
    app = await bed.start({ duraflow: { workflows: [child, one, parent], worker: { shutdownTimeoutMs: 100 } } });
    workflows = app.get(WorkflowService);
  }, 60_000);
  beforeEach(() => bed.db.client.query(`TRUNCATE agent_tasks, step_runs, dead_letter_queue`));

  async function taskCount(): Promise<number> {
    return Number((await bed.db.client.query(`SELECT count(*) FROM agent_tasks`)).rows[0].count);
  }

  it('refuses bad tags with a typed error naming the option, writing nothing', async () => {
    const bad: Array<[unknown, string]> = [
      [{ tenant: 5 }, 'must be a string'],
      [['a'], 'must be an object'],
      ['tenant:acme', 'must be an object'],
      [Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])), 'at most 16 tags'],
      [{ 'bad key': 'v' }, 'key "bad key"'],
      [{ ['k'.repeat(65)]: 'v' }, 'must be 1 to 64 characters'],
      [{ '': 'v' }, 'must be 1 to 64 characters'],
      [{ tenant: 'x'.repeat(257) }, 'at most 256 characters'],
      [{ tenant: 'a\0b' }, 'NUL'],
    ];
    for (const [tags, message] of bad) {
      const options = { tags: tags as Record<string, string> };
      await expect(workflows.submit('tags-one', {}, options)).rejects.toMatchObject({ code: 'INVALID_SUBMIT_OPTIONS', option: 'tags' });
      await expect(workflows.submit('tags-one', {}, options)).rejects.toThrow(message);
      await expect(workflows.submitMany('tags-one', [{}], options)).rejects.toBeInstanceOf(InvalidSubmitOptionsError);
      await expect(workflows.list(options)).rejects.toBeInstanceOf(InvalidListOptionsError);
      await expect(workflows.countByStatus(options)).rejects.toMatchObject({ option: 'tags' });
      await expect(workflows.cancelMany(options)).rejects.toBeInstanceOf(InvalidBulkFilterError);
    }
    expect(await taskCount()).toBe(0);
    // The limits themselves are accepted.
    const edge = { ['k'.repeat(64)]: 'v'.repeat(256), 'a.b_c-D9': '' };
    expect((await workflows.submit('tags-one', {}, { tags: edge, scheduledAt: LATER })).tags).toEqual(edge);
  });

  it('stores tags with the task ({} when none): submit, submitMany, get', async () => {
    const tagged = await workflows.submit('tags-one', {}, { tags: { tenant: 'acme', order: '123' }, scheduledAt: LATER });
    expect(tagged.tags).toEqual({ tenant: 'acme', order: '123' });
    expect((await workflows.get(tagged.id))!.tags).toEqual({ tenant: 'acme', order: '123' });
    const plain = await workflows.submit('tags-one', {}, { scheduledAt: LATER });
    expect((await workflows.get(plain.id))!.tags).toEqual({});
    const many = await workflows.submitMany('tags-one', [{}, {}], { tags: { tenant: 'initech' }, scheduledAt: LATER });
    expect(many.map((task) => task.tags)).toEqual([{ tenant: 'initech' }, { tenant: 'initech' }]);
    const { rows } = await bed.db.client.query(`SELECT tags FROM agent_tasks WHERE id = $1`, [tagged.id]);
    expect(rows[0].tags).toEqual({ tenant: 'acme', order: '123' });
    // In the caller's transaction; bad tags there throw before the transaction writes anything.
    const inTransaction = await app
      .get(DataSource)
      .transaction((manager) => workflows.submit('tags-one', {}, { tags: { tenant: 'umbrella' }, scheduledAt: LATER }, manager));
    expect((await workflows.get(inTransaction.id))!.tags).toEqual({ tenant: 'umbrella' });
    const refused = app.get(DataSource).transaction((manager) => workflows.submit('tags-one', {}, { tags: { '': 'x' } }, manager));
    await expect(refused).rejects.toBeInstanceOf(InvalidSubmitOptionsError);
    expect(await taskCount()).toBe(5);
  });

  it("children take their parent's tags unless given their own; a fork keeps the original's", async () => {
    const task = await workflows.submit('tags-parent', {}, { tags: { tenant: 'acme', region: 'eu' } });
    const done = await workflows.waitFor(task.id, WAIT);
    expect(done.status).toBe(TaskStatus.COMPLETED);
    const { inherited, own } = done.output as { inherited: string; own: string };
    expect((await workflows.get(inherited))!.tags).toEqual({ tenant: 'acme', region: 'eu' });
    expect((await workflows.get(own))!.tags).toEqual({ tenant: 'globex' });

    const original = await workflows.submit('tags-one', {}, { tags: { tenant: 'acme' } });
    await workflows.waitFor(original.id, WAIT);
    const fork = await workflows.fork(original.id, { fromStep: 'only' });
    expect((await workflows.get(fork.id))!.tags).toEqual({ tenant: 'acme' });
  });

  it('list and count filter on tags as an AND of the pairs; the bulk operations too', async () => {
    const submit = (tags?: Record<string, string>) => workflows.submit('tags-one', {}, { tags, scheduledAt: LATER });
    const acmeEu = await submit({ tenant: 'acme', region: 'eu' });
    const acmeUs = await submit({ tenant: 'acme', region: 'us' });
    await submit({ tenant: 'globex', region: 'eu' });
    await submit();
    const ids = async (tags: Record<string, string>) => (await workflows.list({ tags })).items.map((t) => t.id).sort();
    expect(await ids({ tenant: 'acme' })).toEqual([acmeEu.id, acmeUs.id].sort());
    expect(await ids({ tenant: 'acme', region: 'eu' })).toEqual([acmeEu.id]);
    expect(await ids({ tenant: 'initech' })).toEqual([]);
    expect((await workflows.list({ tags: {} })).items).toHaveLength(4);
    expect((await workflows.countByStatus({ tags: { region: 'eu' } })).pending).toBe(2);
    expect((await workflows.countByStatus({ tags: { tenant: 'acme', region: 'us' } })).pending).toBe(1);
    expect(await workflows.countHeld({ tags: { tenant: 'acme' } })).toBe(0);

    // A bulk filter of tags alone is narrow enough; it changes only the tasks holding every pair.
    expect(await workflows.cancelMany({ tags: { tenant: 'acme', region: 'us' } }, { dryRun: true })).toMatchObject({
      matched: 1,
      changed: 0,
    });
    expect(await workflows.cancelMany({ tags: { tenant: 'acme' } })).toMatchObject({ matched: 2, changed: 2 });
    expect((await workflows.countByStatus({ tags: { tenant: 'acme' } })).cancelled).toBe(2);
    expect((await workflows.countByStatus({})).pending).toBe(2);
  });

  // Ten common tenants and a rare one (50 tasks): what the statistics then say is stable from one ANALYZE to the next.
  // (Over a tag the planner believes common, walking idx_agent_tasks_created newest first is its cheaper plan.)
  it("the list's tag filter is served by idx_agent_tasks_tags, not a sequential scan (50,000 tasks)", async () => {
    await bed.db.client.query(
      `INSERT INTO agent_tasks (workflow_name, input, created_at, tags)
       SELECT 'tags-one', '{}', now() - g * interval '1 millisecond',
              jsonb_build_object('tenant', CASE WHEN g % 1000 = 7 THEN 't7' ELSE 'c' || (g % 10) END)
       FROM generate_series(1, 50000) AS g`,
    );
    await bed.db.client.query('ANALYZE agent_tasks');
    const explained = bed.closeLater(new Client({ connectionString: bed.db.url }), (client) => client.end());
    await explained.connect();
    const plans: string[] = [];
    explained.on('notice', (notice) => {
      const text = /plan:\n([\s\S]*)$/.exec(notice.message ?? '')?.[1];
      if (text) plans.push(text);
    });
    for (const setting of [`LOAD 'auto_explain'`, 'SET auto_explain.log_min_duration = 0', 'SET auto_explain.log_level = notice']) {
      await explained.query(setting);
    }
    const store = new TaskStore(clientExecutor(explained) as DuraflowDatabase);
    const page = await store.listTasks({ tags: { tenant: 't7' }, limit: 50, maxBytes: 1 << 20 });
    expect(page.rows).toHaveLength(50);
    expect(page.rows.every((row) => row.task.tags.tenant === 't7')).toBe(true);
    const plan = plans.find((text) => text.includes('agent_tasks'))!;
    console.log(`The list's plan with a tag filter, 50,000 tasks:\n${plan}`);
    expect(plan).toContain('Bitmap Index Scan on idx_agent_tasks_tags');
    expect(plan).not.toContain('Seq Scan');
  }, 120_000);
});
