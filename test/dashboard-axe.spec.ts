import { randomUUID } from 'node:crypto';
import { INestApplication } from '@nestjs/common';
import { Page } from 'puppeteer-core';
import {
  AgentTask,
  CallbackHandle,
  DuraflowDashboardModule,
  SagaService,
  ScheduleDefinition,
  TaskStatus,
  workflow,
  WorkflowContext,
  WorkflowService,
} from '@duraflow/nestjs';
import { RunningEngine } from '../src/engine';
import { violationsInBothSchemes } from './support/accessibility';
import { launchBrowser, TestBrowser } from './support/browser';
import { pressEnter, screenshotBothSchemes, screenshotsFolder, tabTo } from './support/browser-actions';
import { TestHttpApp, useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';
import { crashedRunOnReorderedCode, DASHBOARD_WORKFLOWS, OPERATOR_COOKIE, OperatorGuard } from './fixtures/dashboard/dashboard-app';
import { startTestEngine } from './fixtures/engine/engine-app';

/**
 * axe-core on the dashboard's pages that test/dashboard-overview.spec.ts does not check, in a real
 * Chromium against a real app and PostgreSQL, light and dark: the Events page (an event and the
 * task it started, an open debounce and an open batch), the dead-letter list and its Retry and
 * Discard confirmations, the Cancel, Resume, Fork, bulk Cancel all…, Send a signal and schedule
 * confirmations, a run's callbacks and their form, the refusal and "not found" pages, and the
 * engine's sign-in page. No serious or critical violation in either scheme. Screenshots of the
 * Events page and the dead-letter list go to a temporary folder, or to docs/screenshots with
 * DURAFLOW_UPDATE_SCREENSHOTS=1.
 */

const MOUNT = '/ops/duraflow';
const SCREENSHOTS = screenshotsFolder();

jest.setTimeout(120_000);

const HOUR = 3_600_000;
const NIGHTLY: ScheduleDefinition = { name: 'nightly-report', workflow: 'many-steps', cron: '0 3 * * *', input: { steps: 2 } };
const seenCallbacks = new Map<string, CallbackHandle>();

/** One task per `order.paid`. */
const shipOrder = workflow(
  'ship-order',
  async (ctx: WorkflowContext<{ orderId: string }>) => ctx.step.run('label', () => ({ label: `L-${ctx.input.orderId}` })),
  { on: 'order.paid' },
);
/** One task per hour's batch of `order.paid` (still open while the test runs). */
const paidDigest = workflow('paid-digest', async () => 'digest', { on: 'order.paid', batch: { maxSize: 100, timeoutMs: HOUR } });
/** One task per order once it has been quiet for an hour (still open while the test runs). */
const reindexOrder = workflow('reindex-order', async () => 'reindexed', {
  on: 'order.paid',
  debounce: { key: 'orderId', periodMs: HOUR },
});
/** Waits for an operator's approval through a callback url. */
const signOff = workflow('sign-off', async (ctx: WorkflowContext) => {
  const callback = await ctx.createCallback('approval', { timeoutMs: HOUR });
  seenCallbacks.set(ctx.runId, callback);
  return { body: await ctx.waitForCallback(callback) };
});
/** Waits for the signal `go`. */
const awaitGo = workflow('await-go', async (ctx: WorkflowContext) => ctx.waitForSignal('go'));

describe('every dashboard page passes axe in both colour schemes', () => {
  const bed = useTestBed();
  let app: TestHttpApp;
  let chromium: TestBrowser;
  let workflows: WorkflowService;

  beforeAll(async () => {
    app = await bed.serve({
      duraflow: {
        workflows: [...DASHBOARD_WORKFLOWS, shipOrder, paidDigest, reindexOrder, signOff, awaitGo],
        schedules: [NIGHTLY],
        callbacks: { baseUrl: 'https://hooks.example.com', secret: 'a-test-secret-of-at-least-32-bytes-long' },
      },
      imports: [DuraflowDashboardModule.forRoot({ path: MOUNT, guards: [OperatorGuard], liveIntervalMs: 200 })],
    });
    // The browser keeps connections open: the server would wait for them on close.
    bed.beforeClosing(async () => app.app.getHttpServer().closeAllConnections());
    workflows = app.app.get(WorkflowService);
    chromium = bed.closeLater(await launchBrowser());
  });

  /** A tab of its own (signed in unless told), and every JavaScript or console error it meets. */
  async function openTab(signedIn = true): Promise<{ page: Page; errors: string[] }> {
    // Without the credential: a context of its own, which has none of the other tabs' cookies.
    const page = signedIn ? await chromium.browser.newPage() : await (await chromium.browser.createBrowserContext()).newPage();
    await page.setViewport({ width: 1200, height: 800 });
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(`page error: ${String(error)}`));
    page.on('console', (message) => {
      if (message.type() === 'error') errors.push(`console: ${message.text()}`);
    });
    if (signedIn) await page.setCookie({ name: OPERATOR_COOKIE.name, value: OPERATOR_COOKIE.value, url: app.url });
    return { page, errors };
  }

  /** Opens `path` (under the mount), expects `status`, and checks the page with axe in both schemes. */
  async function visitAndCheck(page: Page, path: string, status = 200): Promise<void> {
    expect([path, (await page.goto(`${app.url}${MOUNT}${path}`))!.status()]).toEqual([path, status]);
    await expectNoSeriousViolation(page, path);
  }

  async function expectNoSeriousViolation(page: Page, label: string): Promise<void> {
    expect([label, await violationsInBothSchemes(page)]).toEqual([label, { light: [], dark: [] }]);
  }

  const text = (page: Page, selector: string) => page.$eval(selector, (element: any) => element.innerText as string);
  const cellsOf = (page: Page, selector: string) =>
    page.$$eval(selector, (rows) => rows.map((row: any) => [...row.querySelectorAll('td')].map((cell: any) => cell.innerText.trim())));

  async function finished(name: string, input: unknown = {}): Promise<AgentTask> {
    return workflows.waitFor((await workflows.submit(name, input)).id, { timeoutMs: 20_000 });
  }

  it('shows the recent events with the tasks they started and the open debounce and batch, from the navigation', async () => {
    const paid = await workflows.publish('order.paid', { orderId: 'o-1041', amount: 129.5 }, { idempotencyKey: 'payment-77' });
    await workflows.publish('nobody.listens', { note: 'no workflow subscribes' });
    const shipTaskId = paid.deliveries.find((delivery) => delivery.workflowName === 'ship-order')!.taskId!;
    await workflows.waitFor(shipTaskId, { timeoutMs: 20_000 });

    const { page, errors } = await openTab();
    await page.goto(`${app.url}${MOUNT}`);
    await tabTo(page, `header nav a[href="${MOUNT}/events"]`);
    expect(await pressEnter(page)).toBe(200);
    expect(await text(page, 'h1')).toBe('Events');
    expect(await page.$eval('header nav a[aria-current="page"]', (link: any) => link.innerText)).toBe('Events');
    const open = await cellsOf(page, 'main h2:first-of-type + table tbody tr');
    expect(open.map((cells) => cells.slice(0, 4)).sort()).toEqual([
      ['paid-digest', 'batch', '', '1'],
      ['reindex-order', 'debounce', 'o-1041', '1'],
    ]);
    const started = await text(page, `#event-${paid.eventId} td:last-child`);
    expect(started).toContain(`ship-order: ${shipTaskId}`);
    expect(started).toMatch(/paid-digest: waiting in its debounce or batch/);
    expect(started).toMatch(/reindex-order: waiting in its debounce or batch/);
    expect(await text(page, 'main')).toContain('no workflow subscribes');
    await expectNoSeriousViolation(page, '/events');
    await screenshotBothSchemes(page, SCREENSHOTS, 'events');

    // From an event to the task it started, by keyboard.
    await tabTo(page, `#event-${paid.eventId} a[href="${MOUNT}/tasks/${shipTaskId}"]`);
    expect(await pressEnter(page)).toBe(200);
    expect(await text(page, 'h1 .badge')).toBe('completed');
    // One event name's list.
    await visitAndCheck(page, '/events?name=order.paid');
    expect(await page.$(`#event-${paid.eventId}`)).not.toBeNull();
    expect(await text(page, 'main')).not.toContain('no workflow subscribes');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('lists the dead letters, and confirms their Retry and Discard, then discards one', async () => {
    const shipment = await finished('shipment');
    expect(shipment.status).toBe(TaskStatus.PARTIAL_ROLLBACK);
    const { page, errors } = await openTab();
    await page.goto(`${app.url}${MOUNT}`);
    await tabTo(page, `header nav a[href="${MOUNT}/dead-letters"]`);
    expect(await pressEnter(page)).toBe(200);
    expect(await text(page, 'h1')).toBe('Dead letters');
    const rows = await cellsOf(page, 'main table tbody tr');
    const row = rows.find((cells) => cells[1] === shipment.id);
    expect(row?.slice(2, 5)).toEqual(['reserve-stock', expect.stringContaining('warehouse API timed out'), '0']);
    await expectNoSeriousViolation(page, '/dead-letters');
    await screenshotBothSchemes(page, SCREENSHOTS, 'dead-letters');

    const deadLetters = () => app.app.get(SagaService).listDeadLetters({ taskId: shipment.id });
    const [entry] = (await deadLetters()).items;
    await visitAndCheck(page, `/tasks/${shipment.id}/dead-letters/${entry.id}/retry`);
    expect(await text(page, 'h1')).toBe('Retry this compensation?');
    await page.goto(`${app.url}${MOUNT}/dead-letters`);
    await tabTo(page, `a[href="${MOUNT}/tasks/${shipment.id}/dead-letters/${entry.id}/discard"]`);
    expect(await pressEnter(page)).toBe(200);
    await expectNoSeriousViolation(page, 'the discard confirmation');
    await tabTo(page, 'form button[type="submit"]');
    expect(await pressEnter(page)).toBe(200);
    expect(page.url()).toBe(`${app.url}${MOUNT}/tasks/${shipment.id}?notice=discarded`);
    await expectNoSeriousViolation(page, 'the task after a discard');
    expect((await deadLetters()).items).toEqual([]);
    // The list once empty.
    await visitAndCheck(page, '/dead-letters');
    expect(await text(page, 'main')).toContain('The dead-letter queue is empty.');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('confirms Cancel, Cancel and compensate, Resume, Fork, Cancel all… and the schedule actions', async () => {
    const waiting = await workflows.submit('approval', {}, { scheduledAt: new Date(Date.now() + HOUR) });
    const original = await finished('many-steps', { steps: 3 });
    const heldId = await crashedRunOnReorderedCode(bed.db.client);
    await eventually(`task ${heldId} is held`, () => workflows.get(heldId), { until: (task) => task?.heldAt instanceof Date });
    const later = new Date(Date.now() + HOUR);
    const pending = [
      await workflows.submit('odd-key', {}, { scheduledAt: later }),
      await workflows.submit('odd-key', {}, { scheduledAt: later }),
    ];

    const { page, errors } = await openTab();
    await visitAndCheck(page, `/tasks/${waiting.id}/cancel`);
    expect(await text(page, 'h1')).toBe('Cancel this task?');
    await visitAndCheck(page, `/tasks/${waiting.id}/cancel?compensate=true`);
    expect(await text(page, 'h1')).toBe('Cancel and compensate this task?');
    await visitAndCheck(page, '?held=true');
    await visitAndCheck(page, `/tasks/${heldId}`);
    await visitAndCheck(page, `/tasks/${heldId}/resume`);
    expect(await text(page, 'h1')).toBe('Resume this held task?');
    await visitAndCheck(page, '/bulk/resume?held=true');
    await visitAndCheck(page, `/tasks/${original.id}/fork?step=step-002`);
    expect(await text(page, 'h1')).toBe('Fork this task from step “step-002”?');
    await visitAndCheck(page, '/workflows/many-steps/schedules/nightly-report/trigger');
    await visitAndCheck(page, '/workflows/many-steps/schedules/nightly-report/resume');

    // Cancel all… from a filtered list, by keyboard, then its result page.
    await visitAndCheck(page, '?workflow=odd-key&status=pending');
    await tabTo(page, `a[href^="${MOUNT}/bulk/cancel?"]`);
    expect(await pressEnter(page)).toBe(200);
    expect(await text(page, 'h1')).toBe('Cancel the tasks that match?');
    expect(await text(page, '[data-matched]')).toBe('2');
    await expectNoSeriousViolation(page, 'the Cancel all… confirmation');
    await tabTo(page, 'form button[type="submit"]');
    expect(await pressEnter(page)).toBe(200);
    expect(await text(page, '[data-changed]')).toBe('2');
    await expectNoSeriousViolation(page, 'the Cancel all… result');
    for (const task of pending) expect((await workflows.get(task.id))!.status).toBe(TaskStatus.CANCELLED);
    await visitAndCheck(page, '/bulk/retry?workflow=odd-key&status=cancelled');
    expect(errors).toEqual([]);
    await page.close();
    await workflows.cancel(waiting.id);
  });

  it('sends a signal from its form (a payload that is not JSON shown back first)', async () => {
    const task = await workflows.submit('await-go');
    await eventually('the task waits for its signal', async () =>
      (await workflows.getSteps(task.id)).some((step) => step.stepKey === 'signal:go#1' && step.status === 'waiting'),
    );
    const { page, errors } = await openTab();
    await page.goto(`${app.url}${MOUNT}/tasks/${task.id}`);
    await tabTo(page, `a[href="${MOUNT}/tasks/${task.id}/signal"]`);
    expect(await pressEnter(page)).toBe(200);
    await expectNoSeriousViolation(page, 'the signal form');
    await page.type('input[name="name"]', 'go');
    await page.type('textarea[name="payload"]', '{nope');
    await tabTo(page, 'form button[type="submit"]');
    expect(await pressEnter(page)).toBe(400);
    expect(await text(page, 'main')).toContain('The payload is not JSON');
    await expectNoSeriousViolation(page, 'the signal form with its problem');
    await page.$eval('textarea[name="payload"]', (area: any) => (area.value = ''));
    await page.type('textarea[name="payload"]', '{"ok":true}');
    await tabTo(page, 'form button[type="submit"]');
    expect(await pressEnter(page)).toBe(200);
    expect(page.url()).toBe(`${app.url}${MOUNT}/tasks/${task.id}?notice=signalled`);
    expect(await workflows.waitFor(task.id, { timeoutMs: 20_000 })).toMatchObject({ status: 'completed', output: { ok: true } });
    await visitAndCheck(page, `/tasks/${task.id}`);
    expect(await text(page, 'main')).toContain('Signals (1)');
    // The 400 above is one console line; nothing else: the name field's pattern is one Chromium
    // compiles (with the `v` flag, a "-" in a class must be escaped), so the browser checks it.
    expect(errors.filter((error) => !/status of 400/.test(error))).toEqual([]);
    await page.close();
  });

  it("shows a run's callbacks and completes one from its form", async () => {
    const task = await workflows.submit('sign-off');
    await eventually('the task waits for its callback', async () => seenCallbacks.has(task.id));
    await eventually('the callback wait is recorded', async () =>
      (await workflows.getSteps(task.id)).some((step) => step.status === 'waiting'),
    );
    const callback = seenCallbacks.get(task.id)!;
    const { page, errors } = await openTab();
    await visitAndCheck(page, `/tasks/${task.id}`);
    expect(await text(page, 'main')).toContain('Callbacks (1)');
    await tabTo(page, `#callback-${callback.id} a[href="${MOUNT}/tasks/${task.id}/callbacks/${callback.id}"]`);
    expect(await pressEnter(page)).toBe(200);
    await expectNoSeriousViolation(page, 'the callback form');
    await page.type('textarea[name="payload"]', '<b>nope</b>');
    await tabTo(page, 'form button[type="submit"]');
    expect(await pressEnter(page)).toBe(400);
    expect(await text(page, 'main')).toContain('The body is not JSON');
    await expectNoSeriousViolation(page, 'the callback form with its problem');
    await page.$eval('textarea[name="payload"]', (area: any) => (area.value = ''));
    await page.type('textarea[name="payload"]', '{"approved":"by the operator"}');
    await tabTo(page, 'form button[type="submit"]');
    expect(await pressEnter(page)).toBe(200);
    expect(page.url()).toBe(`${app.url}${MOUNT}/tasks/${task.id}?notice=callback-completed`);
    await expectNoSeriousViolation(page, 'the task after its callback');
    expect(await workflows.waitFor(task.id, { timeoutMs: 20_000 })).toMatchObject({
      status: 'completed',
      output: { body: { approved: 'by the operator' } },
    });
    expect(errors.filter((error) => !/status of 400/.test(error))).toEqual([]);
    await page.close();
  });

  it('shows its refusals and "not found" pages accessibly too', async () => {
    const done = await finished('many-steps', { steps: 1 });
    const { page } = await openTab();
    await visitAndCheck(page, `/tasks/${randomUUID()}`, 404);
    expect(await text(page, 'h1')).toBe('No such task');
    await visitAndCheck(page, `/tasks/${done.id}/cancel`, 409);
    expect(await text(page, 'h1')).toBe('Nothing to cancel');
    await visitAndCheck(page, '/bulk/cancel?held=true', 400);
    expect(await text(page, 'h1')).toBe('Bulk action refused');
    await visitAndCheck(page, '/workflows/no-such-workflow', 404);
    await page.close();

    const stranger = await openTab(false);
    await visitAndCheck(stranger.page, '', 401);
    expect(await text(stranger.page, 'h1')).toBe('Sign-in needed');
    await stranger.page.browserContext().close();
  });

  describe('the engine app', () => {
    let engine: RunningEngine;

    beforeAll(async () => {
      engine = await startTestEngine(bed, { DURAFLOW_API_KEY: 'operator-key-1' });
    });
    afterAll(async () => {
      (engine.app as INestApplication).getHttpServer().closeAllConnections();
      await bed.close(engine);
    });

    it('shows its refusal, its sign-in form and a wrong key accessibly', async () => {
      const { page } = await openTab(false);
      expect((await page.goto(`${engine.httpUrl}/duraflow`))!.status()).toBe(401);
      await expectNoSeriousViolation(page, "the engine's refusal");
      expect((await page.goto(`${engine.httpUrl}/duraflow/login`))!.status()).toBe(200);
      await expectNoSeriousViolation(page, 'the sign-in form');
      await page.keyboard.type('not-the-key'); // the key field has the focus
      expect(await pressEnter(page)).toBe(401);
      expect(await text(page, '[role="alert"]')).toContain('not the engine');
      await expectNoSeriousViolation(page, 'the sign-in form with a wrong key');
      await page.$eval('#api-key', (field: any) => (field.value = ''));
      await page.type('#api-key', 'operator-key-1');
      expect(await pressEnter(page)).toBe(200);
      expect(await text(page, 'h1')).toBe('Tasks');
      await expectNoSeriousViolation(page, "the engine's task list");
      await page.browserContext().close();
    });
  });
});
