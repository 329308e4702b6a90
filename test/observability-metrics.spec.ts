import { Registry } from 'prom-client';
import {
  DuraflowMetrics,
  workflow,
  InvalidDuraflowOptionsError,
  ReaperService,
  SagaService,
  TaskStatus,
  WorkflowService,
} from '@duraflow/nestjs';
import { resolveDuraflowOptions } from '@duraflow/nestjs/config/resolved-options';
import { brokenWorkflow, checkoutWorkflow, quickWorkflow } from './fixtures/observability/workflows';
import { metricType, sampleValue } from './support/prometheus';
import { Gate } from './fixtures/steps/gate';
import { TcpProxy } from './support/tcp-proxy';
import { SUBMIT_ONLY, useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/*
 * Prometheus metrics through prom-client, in a registry the test passes: the counters and
 * histograms after a run of tasks that complete, fail, roll back and leave a dead letter; the
 * gauges read from the database at scrape time; the reaper's actions.
 */

describe('metrics', () => {
  const bed = useTestBed({ databasePerTest: true });

  async function startWithMetrics(options: { prefix?: string; submitOnly?: boolean } = {}) {
    const registry = new Registry();
    const app = await bed.start({
      duraflow: {
        // Submit-only: no worker, and no reaper of its own (a test reaps by hand, and a reaping
        // pass of the app's leader would otherwise race it for the stale tasks).
        ...(options.submitOnly ? { ...SUBMIT_ONLY, reaper: { enabled: false } } : {}),
        workflows: [quickWorkflow, checkoutWorkflow(), brokenWorkflow],
        metrics: { registry, prefix: options.prefix },
      },
    });
    return { app, registry, scrape: () => registry.metrics() };
  }

  it('counts finished tasks by workflow and outcome, step attempts, compensations, dead letters and claims', async () => {
    const { app, scrape } = await startWithMetrics();
    const workflows = app.get(WorkflowService);
    const submitted = await Promise.all([
      workflows.submit('quick', {}),
      workflows.submit('quick', {}),
      workflows.submit('checkout', {}),
      workflows.submit('checkout', { decline: true }),
      workflows.submit('checkout', { decline: true, seatUndoFails: true }),
      workflows.submit('broken', {}),
    ]);
    const ended = await Promise.all(submitted.map((task) => workflows.waitFor(task.id)));
    expect(ended.map((task) => task.status)).toEqual([
      TaskStatus.COMPLETED,
      TaskStatus.COMPLETED,
      TaskStatus.COMPLETED,
      TaskStatus.ROLLED_BACK,
      TaskStatus.PARTIAL_ROLLBACK,
      TaskStatus.FAILED,
    ]);

    // A run is counted once its outcome is written: a moment after waitFor can see it.
    const text = await eventually('all six runs are counted', scrape, {
      until: (exposition) =>
        ['quick', 'checkout', 'broken']
          .map((workflow) =>
            ['completed', 'failed', 'rolled_back', 'partial_rollback'].map((outcome) => finished(exposition, workflow, outcome)),
          )
          .flat()
          .reduce((sum, count) => sum + count, 0) === 6,
    });

    expect(finished(text, 'quick', 'completed')).toBe(2);
    expect(finished(text, 'checkout', 'completed')).toBe(1);
    expect(finished(text, 'checkout', 'rolled_back')).toBe(1);
    expect(finished(text, 'checkout', 'partial_rollback')).toBe(1);
    expect(finished(text, 'broken', 'failed')).toBe(1);
    expect(sampleValue(text, 'duraflow_runs_total', { workflow: 'broken', outcome: 'failed' })).toBe(1);
    expect(sampleValue(text, 'duraflow_run_duration_seconds_count', { workflow: 'quick', outcome: 'completed' })).toBe(2);

    // Every attempt: charge failed twice in each of the two declined checkouts.
    const steps = (step: string, outcome: string, workflow = 'checkout') =>
      sampleValue(text, 'duraflow_step_duration_seconds_count', { workflow, step, outcome });
    expect(steps('charge', 'failed')).toBe(4);
    expect(steps('charge', 'completed')).toBe(1);
    expect(steps('reserve', 'completed')).toBe(3);
    expect(steps('only', 'completed', 'quick')).toBe(2);

    const compensations = (step: string, outcome: string) =>
      sampleValue(text, 'duraflow_compensations_total', { workflow: 'checkout', step, outcome });
    expect(compensations('reserve', 'compensated')).toBe(2);
    expect(compensations('hold-seat', 'compensated')).toBe(1);
    expect(compensations('hold-seat', 'failed')).toBe(1);
    expect(sampleValue(text, 'duraflow_dead_letters_total', { workflow: 'checkout' })).toBe(1);

    // A retry from the queue that fails again is one more failed compensation, not one more dead letter.
    const [entry] = await bed.rows.deadLetters(ended[4].id);
    expect((await app.get(SagaService).retryDeadLetter(entry.id)).outcome).toBe('failed');
    const afterRetry = await scrape();
    expect(sampleValue(afterRetry, 'duraflow_compensations_total', { workflow: 'checkout', step: 'hold-seat', outcome: 'failed' })).toBe(2);
    expect(sampleValue(afterRetry, 'duraflow_dead_letters_total', { workflow: 'checkout' })).toBe(1);

    expect(sampleValue(text, 'duraflow_tasks_claimed_total', { workflow: 'quick' })).toBe(2);
    expect(sampleValue(text, 'duraflow_task_wait_seconds_count', { workflow: 'checkout' })).toBe(3);
    expect(sampleValue(text, 'duraflow_claim_duration_seconds_count')).toBeGreaterThanOrEqual(1);

    // The gauges, read from the tables at this scrape.
    expect(sampleValue(text, 'duraflow_dead_letters', { workflow: 'checkout' })).toBe(1);
    expect(sampleValue(text, 'duraflow_tasks', { workflow: 'quick', status: 'pending' })).toBe(0);
    expect(sampleValue(text, 'duraflow_tasks', { workflow: 'quick', status: 'running' })).toBe(0);

    expect(
      Object.fromEntries(
        [
          'tasks_finished_total',
          'runs_total',
          'run_duration_seconds',
          'step_duration_seconds',
          'compensations_total',
          'dead_letters_total',
          'claim_duration_seconds',
          'tasks_claimed_total',
          'claim_failures_total',
          'task_wait_seconds',
          'heartbeat_failures_total',
          'write_failures_total',
          'reaper_actions_total',
          'tasks',
          'oldest_pending_age_seconds',
          'dead_letters',
        ].map((name) => [name, metricType(text, `duraflow_${name}`)]),
      ),
    ).toEqual({
      tasks_finished_total: 'counter',
      runs_total: 'counter',
      run_duration_seconds: 'histogram',
      step_duration_seconds: 'histogram',
      compensations_total: 'counter',
      dead_letters_total: 'counter',
      claim_duration_seconds: 'histogram',
      tasks_claimed_total: 'counter',
      claim_failures_total: 'counter',
      task_wait_seconds: 'histogram',
      heartbeat_failures_total: 'counter',
      write_failures_total: 'counter',
      reaper_actions_total: 'counter',
      tasks: 'gauge',
      oldest_pending_age_seconds: 'gauge',
      dead_letters: 'gauge',
    });
  });

  it('reads the gauges at scrape time: unfinished tasks by workflow and status, the oldest runnable pending task’s age', async () => {
    const { app, scrape } = await startWithMetrics({ submitOnly: true });
    await app.get(WorkflowService).submit('quick', {});
    await app.get(WorkflowService).submit('quick', {}, { scheduledAt: new Date(Date.now() + 3_600_000) });
    await bed.db.client.query(
      `INSERT INTO agent_tasks (workflow_name, status, created_at) VALUES ('quick', 'pending', now() - interval '1 hour')`,
    );
    await bed.db.client.query(`INSERT INTO agent_tasks (workflow_name, status, heartbeat_at) VALUES ('quick', 'running', now())`);
    await bed.db.client.query(`INSERT INTO agent_tasks (workflow_name, status) VALUES ('elsewhere', 'pending'), ('quick', 'completed')`);

    const text = await scrape();
    expect(sampleValue(text, 'duraflow_tasks', { workflow: 'quick', status: 'pending' })).toBe(3);
    expect(sampleValue(text, 'duraflow_tasks', { workflow: 'quick', status: 'running' })).toBe(1);
    expect(sampleValue(text, 'duraflow_tasks', { workflow: 'elsewhere', status: 'pending' })).toBe(1);
    expect(sampleValue(text, 'duraflow_tasks', { workflow: 'checkout', status: 'pending' })).toBe(0);
    expect(sampleValue(text, 'duraflow_tasks', { workflow: 'quick', status: 'completed' })).toBeUndefined();
    // The task created an hour ago, not the one scheduled an hour ahead.
    expect(sampleValue(text, 'duraflow_oldest_pending_age_seconds', { workflow: 'quick' })).toBeGreaterThanOrEqual(3600);
    expect(sampleValue(text, 'duraflow_oldest_pending_age_seconds', { workflow: 'checkout' })).toBe(0);

    // Read again at the next scrape, never kept from the last one.
    await bed.db.client.query(`UPDATE agent_tasks SET status = 'completed' WHERE workflow_name = 'quick' AND status = 'pending'`);
    expect(sampleValue(await scrape(), 'duraflow_tasks', { workflow: 'quick', status: 'pending' })).toBe(0);
  });

  it('counts what the reaper did with stale tasks, and the tasks it ended as finished', async () => {
    const { app, scrape } = await startWithMetrics({ submitOnly: true });
    await bed.db.client.query(
      `INSERT INTO agent_tasks (workflow_name, status, heartbeat_at, retry_count, max_retries)
       VALUES ('quick', 'running', now() - interval '1 hour', 0, 3), ('quick', 'running', now() - interval '1 hour', 0, 0)`,
    );
    const reaped = await app.get(ReaperService).reapOnce();
    expect([reaped.requeued.length, reaped.ended.length]).toEqual([1, 1]);

    const text = await scrape();
    expect(sampleValue(text, 'duraflow_reaper_actions_total', { action: 'requeued' })).toBe(1);
    expect(sampleValue(text, 'duraflow_reaper_actions_total', { action: 'ended' })).toBe(1);
    expect(finished(text, 'quick', 'failed')).toBe(1);
  });

  it('counts the heartbeats that failed and the write a run gave up on during an outage', async () => {
    const server = new URL(bed.db.url);
    const proxy = bed.closeLater(await TcpProxy.start({ targetHost: server.hostname, targetPort: Number(server.port || 5432) }), (opened) =>
      opened.teardown(),
    );
    const gate = new Gate();
    const gated = workflow('gated', async (ctx) => ctx.step.run('wait', () => gate.wait()));
    const registry = new Registry();
    const app = await bed.start({
      databaseUrl: proxy.proxiedUrl(bed.db.url),
      logger: ['error'],
      duraflow: {
        workflows: [gated],
        heartbeatIntervalMs: 100,
        // A checkpoint retries an outage for staleAfterMs, then the run gives up (unrecorded).
        reaper: { enabled: false, staleAfterMs: 1_000 },
        metrics: { registry },
      },
    });
    await app.get(WorkflowService).submit('gated', {});
    await gate.reached.promise;

    await proxy.stop();
    gate.open();
    const text = await eventually('the run gave its checkpoint up', () => registry.metrics(), {
      until: (exposition) => sampleValue(exposition, 'duraflow_write_failures_total', { workflow: 'gated' }) === 1,
    });
    expect(sampleValue(text, 'duraflow_heartbeat_failures_total')).toBeGreaterThanOrEqual(1);
    expect(sampleValue(text, 'duraflow_runs_total', { workflow: 'gated', outcome: 'unrecorded' })).toBe(1);
    // The gauges need the database: left out of this scrape rather than failing it.
    expect(sampleValue(text, 'duraflow_tasks', { workflow: 'gated', status: 'running' })).toBeUndefined();
    await proxy.restart();
  });

  it('names every metric with the prefix given', async () => {
    const { app, scrape } = await startWithMetrics({ prefix: 'shop_workflows_' });
    const workflows = app.get(WorkflowService);
    await workflows.waitFor((await workflows.submit('quick', {})).id);
    const text = await eventually('the run is counted', scrape, {
      until: (exposition) =>
        sampleValue(exposition, 'shop_workflows_tasks_finished_total', { workflow: 'quick', outcome: 'completed' }) === 1,
    });
    expect(text).not.toContain('duraflow_');
    expect(metricType(text, 'shop_workflows_tasks')).toBe('gauge');
  });

  it('is off unless the metrics option is given', async () => {
    const app = await bed.start({ duraflow: { workflows: [quickWorkflow] } });
    const metrics = app.get(DuraflowMetrics);
    expect(metrics.enabled).toBe(false);
    expect(metrics.registry).toBeUndefined();
    expect(await metrics.metrics()).toBe('');
  });

  it('refuses a prefix Prometheus would not accept, or a registry that is none', () => {
    expect(() => resolveDuraflowOptions({ metrics: { prefix: '9-lives' } })).toThrow(
      new InvalidDuraflowOptionsError('metrics.prefix', 'must be letters, digits, "_" or ":" (not starting with a digit), got 9-lives.'),
    );
    expect(() => resolveDuraflowOptions({ metrics: { registry: {} as never } })).toThrow(
      /"metrics.registry" must be a prom-client Registry/,
    );
    expect(resolveDuraflowOptions({}).metrics).toBeNull();
    expect(resolveDuraflowOptions({ metrics: true }).metrics).toEqual({ registry: undefined, prefix: 'duraflow_' });
  });
});

function finished(exposition: string, workflow: string, outcome: string): number {
  return sampleValue(exposition, 'duraflow_tasks_finished_total', { workflow, outcome }) ?? 0;
}
