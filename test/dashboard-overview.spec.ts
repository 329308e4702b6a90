import { Page } from 'puppeteer-core';
import {
  AgentTask,
  DuraflowDashboardModule,
  ScheduleDefinition,
  TaskOverview,
  UnknownScheduleError,
  workflow,
  WorkflowContext,
  WorkflowInsights,
  WorkflowService,
} from '@duraflow/nestjs';
import { TaskStatsRollup } from '../libs/duraflow/src/background/task-stats-rollup';
import { violationsInBothSchemes } from './support/accessibility';
import { launchBrowser, TestBrowser } from './support/browser';
import { pressEnter, screenshotBothSchemes, screenshotsFolder, tabTo } from './support/browser-actions';
import { TestHttpApp, useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';
import { DASHBOARD_WORKFLOWS, OPERATOR_COOKIE, OPERATOR_HEADERS, OperatorGuard } from './fixtures/dashboard/dashboard-app';

/**
 * The pages the person on call opens first, in a real Chromium against a real app and PostgreSQL:
 * the overview's numbers are those of the tasks inserted (read from the tasks, then from the
 * reaper leader's hourly rollup), a workflow's page pauses, resumes and triggers its schedule
 * from the keyboard, a run's page draws it on one time axis, and axe-core finds no serious or
 * critical violation on any page in either colour scheme. Screenshots go to a temporary folder,
 * or to docs/screenshots with DURAFLOW_UPDATE_SCREENSHOTS=1.
 */

const MOUNT = '/ops/duraflow';
const HOUR = 3_600_000;
const SCREENSHOTS = screenshotsFolder();

jest.setTimeout(120_000);

const NIGHTLY: ScheduleDefinition = { name: 'nightly-report', workflow: 'many-steps', cron: '0 3 * * *', input: { steps: 2 } };

/** Starts a child and waits for it: its run's page links the child from its timeline. An event starts it too. */
const familyWorkflow = workflow(
  'family',
  async (ctx: WorkflowContext) => {
    await ctx.step.run('prepare', () => ({ ready: true }));
    await ctx.runChild('child', 'many-steps', { steps: 2 });
    await ctx.step.run('finish', () => ({ done: true }));
  },
  { on: 'family.requested' },
);

describe('the overview and the workflow pages', () => {
  const bed = useTestBed();
  let app: TestHttpApp;
  let chromium: TestBrowser;
  let workflows: WorkflowService;
  let insights: WorkflowInsights;

  beforeAll(async () => {
    app = await bed.serve({
      // No reaper: the test rolls the hours up itself (a leader would, a minute after boot, before the rows go in).
      duraflow: { workflows: [...DASHBOARD_WORKFLOWS, familyWorkflow], schedules: [NIGHTLY], reaper: { enabled: false } },
      imports: [DuraflowDashboardModule.forRoot({ path: MOUNT, guards: [OperatorGuard], liveIntervalMs: 200 })],
    });
    bed.beforeClosing(async () => app.app.getHttpServer().closeAllConnections());
    workflows = app.app.get(WorkflowService);
    insights = app.app.get(WorkflowInsights);
    chromium = bed.closeLater(await launchBrowser());
  });

  async function openTab(): Promise<{ page: Page; errors: string[] }> {
    const page = await chromium.browser.newPage();
    await page.setViewport({ width: 1200, height: 900 });
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(`page error: ${String(error)}`));
    page.on('console', (message) => {
      if (message.type() === 'error') errors.push(`console: ${message.text()}`);
    });
    await page.setCookie({ name: OPERATOR_COOKIE.name, value: OPERATOR_COOKIE.value, url: app.url });
    return { page, errors };
  }

  /** The page checked by axe in both colour schemes, and its screenshot in each (the viewport only: small files). */
  async function checkAndShoot(page: Page, name: string): Promise<void> {
    expect(await violationsInBothSchemes(page)).toEqual({ light: [], dark: [] });
    await screenshotBothSchemes(page, SCREENSHOTS, name);
  }

  const cellsOf = (page: Page, selector: string) =>
    page.$$eval(selector, (rows) => rows.map((row: any) => [...row.querySelectorAll('td')].map((cell: any) => cell.innerText.trim())));

  /** Finished tasks inserted as a run would leave them: created and started at `start`, ended `durationMs` later. */
  async function insertTasks(name: string, status: string, count: number, start: Date, durationMs: number | null): Promise<void> {
    await bed.db.client.query(
      `INSERT INTO agent_tasks (workflow_name, status, created_at, started_at, completed_at, updated_at)
       SELECT $1, $2, $3::timestamptz, $3::timestamptz, $3::timestamptz + $4 * interval '1 millisecond', now() FROM generate_series(1, $5)`,
      [name, status, start, durationMs, count],
    );
  }

  const within = (value: number | null, expected: number) => {
    expect(value).not.toBeNull();
    expect(value!).toBeGreaterThan(expected / 1.2);
    expect(value!).toBeLessThan(expected * 1.2);
  };

  /** A workflow's row of the overview, the queue's age left out (it grows while the test reads). */
  const rowOf = (overview: TaskOverview, name: string) => {
    const row = overview.workflows.find((entry) => entry.workflow === name);
    if (!row) throw new Error(`no row for ${name}`);
    return row;
  };

  it('counts per workflow and interval what the tasks did, read from the tasks and then from the hourly rollup', async () => {
    const now = Date.now();
    const closedHour = Math.floor(now / HOUR) * HOUR - 3 * HOUR;
    const at = (time: number) => new Date(time);
    // Three hours ago: 3 completed in 1 s and 1 failed after 4 s; 2 rolled back after 2 s and 1 cancelled.
    await insertTasks('report-export', 'completed', 3, at(closedHour + 10 * 60_000), 1000);
    await insertTasks('report-export', 'failed', 1, at(closedHour + 20 * 60_000), 4000);
    await insertTasks('report-import', 'rolled_back', 2, at(closedHour + 30 * 60_000), 2000);
    await insertTasks('report-import', 'cancelled', 1, at(closedHour + 40 * 60_000), 500);
    // Just now: 2 completed in 1 s; 3 waiting for a worker (a workflow no node registers) for ten minutes.
    await insertTasks('report-export', 'completed', 2, at(now - 30_000), 1000);
    await bed.db.client.query(
      `INSERT INTO agent_tasks (workflow_name, status, created_at) SELECT 'report-export', 'pending', $1 FROM generate_series(1, 3)`,
      [at(now - 10 * 60_000)],
    );

    const expectDay = (overview: TaskOverview) => {
      const exported = rowOf(overview, 'report-export');
      expect(exported.totals).toMatchObject({ started: 9, completed: 5, failed: 1, rolledBack: 0, cancelled: 0 });
      expect(exported.totals.failureRate).toBeCloseTo(1 / 6);
      within(exported.totals.p50Ms, 1000);
      within(exported.totals.p95Ms, 4000);
      expect(exported.queueDepth).toBe(3);
      expect(exported.oldestRunnableMs!).toBeGreaterThanOrEqual(10 * 60_000 - 1000);
      const hour = exported.intervals.find((interval) => interval.start.getTime() === closedHour);
      expect(hour).toMatchObject({ started: 4, completed: 3, failed: 1 });
      const imported = rowOf(overview, 'report-import');
      expect(imported.totals).toMatchObject({ started: 3, completed: 0, failed: 0, rolledBack: 2, cancelled: 1, failureRate: 1 });
      within(imported.totals.p50Ms, 2000);
      expect(overview.overall.totals).toMatchObject({ started: 12, completed: 5, failed: 1, rolledBack: 2, cancelled: 1 });
      expect(overview.overall.queueDepth).toBe(3);
    };

    const fromTasks = await insights.overview('day');
    expect(fromTasks.rolledUntil).toBeNull();
    expectDay(fromTasks);
    const lastHour = rowOf(await insights.overview('hour'), 'report-export');
    expect(lastHour.totals).toMatchObject({ started: 5, completed: 2, failed: 0 });
    expect(lastHour.intervals).toHaveLength(12);
    expect((await insights.overview('week')).overall.intervals).toHaveLength(28);

    // The leader's rollup adds every hour that ended (two minutes ago at least); the numbers stay.
    const rollup = app.app.get(TaskStatsRollup);
    const lastClosedHour = () => Math.floor((Date.now() - 120_000) / HOUR) * HOUR;
    const before = lastClosedHour();
    while (await rollup.rollUp()) {
      /* a week and a day, 24 hours per statement */
    }
    const rolled = await insights.overview('day');
    // The hour that closed when the rollup ran (it may have closed while it ran).
    expect([before, lastClosedHour()]).toContain(rolled.rolledUntil!.getTime());
    expectDay(rolled);
    const { rows } = await bed.db.client.query(
      `SELECT workflow_name, started, completed, failed, rolled_back, cancelled FROM duraflow_task_rollup WHERE hour = $1 ORDER BY 1`,
      [at(closedHour)],
    );
    expect(rows).toEqual([
      { workflow_name: 'report-export', started: 4, completed: 3, failed: 1, rolled_back: 0, cancelled: 0 },
      { workflow_name: 'report-import', started: 3, completed: 0, failed: 0, rolled_back: 2, cancelled: 1 },
    ]);
    expect(rowOf(await insights.overview('week'), 'report-export').totals).toMatchObject({ started: 9, completed: 5, failed: 1 });
  });

  it('shows the overview as charts with their numbers in tables, and passes axe in both colour schemes', async () => {
    const { page, errors } = await openTab();
    expect((await page.goto(`${app.url}${MOUNT}`))!.status()).toBe(200);
    // Overview is the first item of the navigation.
    expect(await page.$eval('header nav a', (link: any) => link.innerText)).toBe('Overview');
    expect((await page.goto(`${app.url}${MOUNT}/overview?window=day`))!.status()).toBe(200);
    expect(await page.$eval('h1', (element: any) => element.innerText)).toBe('Overview');
    expect(await page.$eval('nav.windows a[aria-current="page"]', (link: any) => link.innerText)).toBe('Last day');
    const rows = await cellsOf(page, 'table.workflows tbody tr');
    const exported = rows.find((cells) => cells[0] === 'report-export');
    // Workflow, chart, started, completed, failed, rolled back, failure rate, p50, p95, queue, running, oldest waiting.
    expect(exported?.slice(2, 7)).toEqual(['9', '5', '1', '0', '17%']);
    expect(exported?.[9]).toBe('3');
    expect(exported?.[11]).toMatch(/^1\d min/);
    const charts = await page.$$eval('figure.chart svg[role="img"]', (svgs) => svgs.map((svg: any) => svg.getAttribute('aria-label')));
    expect(charts[0]).toContain('All workflows, last day: 12 started, 5 completed, 1 failed, 2 rolled back, 1 cancelled');
    const counts = await cellsOf(page, '.table-scroll table.numbers tbody tr');
    expect(counts.map((cells) => Number(cells[1])).reduce((sum, value) => sum + value, 0)).toBeGreaterThanOrEqual(12);
    // Times are shown in the viewer's time zone, with UTC on hover.
    expect(await page.$eval('main time', (time: any) => time.title)).toMatch(/ UTC$/);
    await checkAndShoot(page, 'overview');

    // From the overview to the workflow's page, by keyboard.
    await tabTo(page, `a[href="${MOUNT}/workflows/report-export"]`);
    expect(await pressEnter(page)).toBe(404);
    expect(await page.$eval('h1', (element: any) => element.innerText)).toBe('No such workflow');
    expect(errors.filter((error) => !/status of 404/.test(error))).toEqual([]);
    await page.close();
  });

  it('pauses, resumes and triggers a schedule from its workflow page, confirmed, by keyboard', async () => {
    await workflows.waitFor((await workflows.submit('many-steps', { steps: 3 })).id, { timeoutMs: 20_000 });
    const { page, errors } = await openTab();
    expect((await page.goto(`${app.url}${MOUNT}/workflows/many-steps`))!.status()).toBe(200);
    expect(await page.$eval('h1', (element: any) => element.innerText)).toBe('Workflow many-steps');
    const versions = await cellsOf(page, 'table:first-of-type tbody tr');
    expect(versions[0].slice(0, 2)).toEqual(['v1', 'registered']);
    const steps = await cellsOf(page, '#steps + p + table tbody tr');
    expect(steps.map((cells) => cells[0])).toEqual(expect.arrayContaining(['step-001', 'step-002', 'step-003']));
    expect((await cellsOf(page, '#schedule-nightly-report'))[0][2]).toBe('active');
    await checkAndShoot(page, 'workflow');

    await tabTo(page, `a[href="${MOUNT}/workflows/many-steps/schedules/nightly-report/pause"]`);
    expect(await pressEnter(page)).toBe(200);
    expect(await page.$eval('h1', (element: any) => element.innerText)).toBe('Pause this schedule?');
    await checkAndShoot(page, 'confirm-pause-schedule');
    await tabTo(page, 'form button[type="submit"]');
    expect(await pressEnter(page)).toBe(200);
    expect(await page.$eval('.notice', (element: any) => element.innerText)).toContain('paused on every node');
    expect((await cellsOf(page, '#schedule-nightly-report'))[0][2]).toMatch(/^paused since /);
    const paused = await bed.db.client.query(`SELECT paused_at FROM duraflow_schedules WHERE name = 'nightly-report'`);
    expect(paused.rows[0].paused_at).toBeInstanceOf(Date);
    expect((await workflows.listSchedules())[0].pausedAt).toBeInstanceOf(Date);

    await tabTo(page, `a[href="${MOUNT}/workflows/many-steps/schedules/nightly-report/resume"]`);
    expect(await pressEnter(page)).toBe(200);
    await tabTo(page, 'form button[type="submit"]');
    expect(await pressEnter(page)).toBe(200);
    expect((await cellsOf(page, '#schedule-nightly-report'))[0][2]).toBe('active');
    expect((await workflows.listSchedules())[0].pausedAt).toBeNull();

    await tabTo(page, `a[href="${MOUNT}/workflows/many-steps/schedules/nightly-report/trigger"]`);
    expect(await pressEnter(page)).toBe(200);
    await tabTo(page, 'form button[type="submit"]');
    expect(await pressEnter(page)).toBe(200);
    const triggered = /\/tasks\/([0-9a-f-]{36})$/.exec(page.url())?.[1];
    expect(triggered).toBeDefined();
    const task = (await workflows.get(triggered!)) as AgentTask;
    expect(task.workflowName).toBe('many-steps');
    expect(task.input).toEqual({ steps: 2 });
    expect(errors).toEqual([]);
    await page.close();
  });

  it('refuses an unknown schedule with its typed error, and a cross-site POST without changing anything', async () => {
    await expect(workflows.pauseSchedule('no-such-schedule')).rejects.toBeInstanceOf(UnknownScheduleError);
    await expect(workflows.triggerSchedule('no-such-schedule')).rejects.toMatchObject({ code: 'UNKNOWN_SCHEDULE' });
    const post = (path: string, headers: Record<string, string>) =>
      fetch(`${app.url}${MOUNT}${path}`, { method: 'POST', headers: { ...OPERATOR_HEADERS, ...headers }, redirect: 'manual' });
    const unknown = await post('/workflows/many-steps/schedules/no-such-schedule/pause', { 'sec-fetch-site': 'same-origin' });
    expect(unknown.status).toBe(404);
    expect(await unknown.text()).toContain('UNKNOWN_SCHEDULE');
    const forged = await post('/workflows/many-steps/schedules/nightly-report/pause', { origin: 'http://evil.example' });
    expect(forged.status).toBe(403);
    const { rows } = await bed.db.client.query(`SELECT paused_at FROM duraflow_schedules WHERE name = 'nightly-report'`);
    expect(rows[0].paused_at).toBeNull();
  });

  it("draws a run's steps, retries, waits, children (linked) and compensations on one time axis", async () => {
    const family = await workflows.waitFor((await workflows.submit('family', {})).id, { timeoutMs: 30_000 });
    const trip = await workflows.waitFor((await workflows.submit('trip', { traveller: 'ada' })).id, { timeoutMs: 20_000 });
    const [child] = await workflows.getChildren(family.id);
    const { page, errors } = await openTab();
    await page.goto(`${app.url}${MOUNT}/tasks/${family.id}`);
    const lanes = await page.$$eval('svg.run-timeline > g', (groups) => groups.map((group: any) => group.textContent.trim()));
    expect(lanes).toEqual(['prepare', 'child ↗', 'finish']);
    await tabTo(page, `svg.run-timeline a[href="${MOUNT}/tasks/${child.id}"]`);
    expect(await pressEnter(page)).toBe(200);
    expect(page.url()).toBe(`${app.url}${MOUNT}/tasks/${child.id}`);

    await page.goto(`${app.url}${MOUNT}/tasks/${trip.id}`);
    const label = await page.$eval('svg.run-timeline', (svg: any) => svg.getAttribute('aria-label'));
    expect(label).toMatch(/3 lane\(s\), 1 retried, 2 compensated$/);
    expect(await page.$$eval('svg.run-timeline rect.c-undo', (marks) => marks.length)).toBe(2);
    expect(await page.$$eval('svg.run-timeline rect.c-bad', (bars) => bars.length)).toBe(1);
    await page.$eval('svg.run-timeline', (svg: any) => svg.scrollIntoView());
    await checkAndShoot(page, 'task-timeline');

    // The workflow's page lists the event that starts it.
    await page.goto(`${app.url}${MOUNT}/workflows/family`);
    expect(await cellsOf(page, '#subscriptions + table tbody tr')).toEqual([['family.requested', 'each', 'one task per event']]);
    expect(await violationsInBothSchemes(page)).toEqual({ light: [], dark: [] });
    expect(errors).toEqual([]);
    await page.close();
  });

  it('passes axe on the task list, a task, the dead letters and an operate confirmation, in both colour schemes', async () => {
    const shipment = await workflows.waitFor((await workflows.submit('shipment', {})).id, { timeoutMs: 20_000 });
    const { page, errors } = await openTab();
    for (const path of ['', `/tasks/${shipment.id}`, '/dead-letters', `/tasks/${shipment.id}/retry`, '/overview?window=hour']) {
      expect([path, (await page.goto(`${app.url}${MOUNT}${path}`))!.status()]).toEqual([path, 200]);
      expect([path, await violationsInBothSchemes(page)]).toEqual([path, { light: [], dark: [] }]);
    }
    expect(errors).toEqual([]);
    await page.close();
  });
});

describe('a paused schedule on several nodes', () => {
  const bed = useTestBed();
  const noop = workflow('paused-noop', async () => ({ ok: true }));
  const schedule: ScheduleDefinition = { name: 'every-second-paused', workflow: 'paused-noop', cron: '* * * * * *' };
  const tasks = async () =>
    (await bed.db.client.query(`SELECT count(*)::int AS n FROM agent_tasks WHERE workflow_name = 'paused-noop'`)).rows[0].n as number;

  it('starts no tick on any node while paused, and ticks again once resumed', async () => {
    const first = await bed.start({ duraflow: { workflows: [noop], schedules: [schedule] } });
    const second = await bed.start({ duraflow: { workflows: [noop], schedules: [schedule] } });
    await eventually('the schedule ticks', async () => (await tasks()) >= 2);
    await first.get(WorkflowService).pauseSchedule('every-second-paused');
    // A tick already under way when the pause committed may still finish.
    await eventually('the ticks under way have ended', async () => {
      const before = await tasks();
      await new Promise((settle) => setTimeout(settle, 1500));
      return (await tasks()) === before;
    });
    const whilePaused = await tasks();
    await new Promise((settle) => setTimeout(settle, 3000));
    expect(await tasks()).toBe(whilePaused);
    const { rows } = await bed.db.client.query(`SELECT last_tick_at FROM duraflow_schedules WHERE name = 'every-second-paused'`);
    // The ticks while paused are done, without a task (no catch-up after the resume).
    expect(rows[0].last_tick_at.getTime()).toBeGreaterThan(Date.now() - 2500);

    await second.get(WorkflowService).resumeSchedule('every-second-paused');
    await eventually('the schedule ticks again', async () => (await tasks()) >= whilePaused + 2);
  });

  it("keeps the overview's hourly rollup on the reaper's leader", async () => {
    await eventually('the leader has rolled the hours up', async () => {
      const { rows } = await bed.db.client.query(`SELECT rolled_until FROM duraflow_task_rollup_state`);
      return rows.length === 1 && rows[0].rolled_until.getTime() === Math.floor((Date.now() - 120_000) / 3_600_000) * 3_600_000;
    });
  });
});
