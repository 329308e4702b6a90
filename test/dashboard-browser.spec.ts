import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { INestApplication } from '@nestjs/common';
import { Page } from 'puppeteer-core';
import { AgentTask, TaskStatus, WorkflowService } from '@duraflow/nestjs';
import { RunningEngine } from '../src/engine';
import { launchBrowser, TestBrowser } from './support/browser';
import { pressEnter, screenshotBothSchemes, screenshotsFolder, tabTo } from './support/browser-actions';
import { TestHttpApp, useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';
import { crashedRunOnReorderedCode, OPERATOR_COOKIE, startDashboardApp } from './fixtures/dashboard/dashboard-app';
import { startTestEngine } from './fixtures/engine/engine-app';
import { deployed } from './fixtures/deploys/deployed-code';

/**
 * The dashboard in a real headless Chromium against a real app and PostgreSQL: pages load
 * without a JavaScript error, work from the keyboard, follow a running task live, and carry
 * out confirmed actions. Screenshots go to a temporary folder, or to docs/screenshots (the
 * guides') with DURAFLOW_UPDATE_SCREENSHOTS=1.
 */

// What the callbacks run inside the page see (this project compiles without the DOM's types).
declare const document: any;
declare const window: any;

const MOUNT = '/ops/duraflow';
const SCREENSHOTS = screenshotsFolder();

jest.setTimeout(90_000);

const bed = useTestBed();
let app: TestHttpApp;
let chromium: TestBrowser;
let workflows: WorkflowService;

beforeAll(async () => {
  app = await startDashboardApp(bed);
  // The browser keeps connections open (some it opened ahead, with no request yet): a server
  // waits for those on close, so they are cut first.
  bed.beforeClosing(async () => app.app.getHttpServer().closeAllConnections());
  workflows = app.app.get(WorkflowService);
  chromium = bed.closeLater(await launchBrowser());
});

/** A tab of its own, and every JavaScript error or console error it meets. */
async function openTab(options: { signedIn?: boolean; url?: string } = {}): Promise<{ page: Page; errors: string[] }> {
  const page = await chromium.browser.newPage();
  await page.setViewport({ width: 1200, height: 800 });
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(`page error: ${String(error)}`));
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(`console: ${message.text()} (${message.location().url ?? ''})`);
  });
  if (options.signedIn ?? true)
    await page.setCookie({ name: OPERATOR_COOKIE.name, value: OPERATOR_COOKIE.value, url: options.url ?? app.url });
  return { page, errors };
}

const text = (page: Page, selector: string) => page.$eval(selector, (element: any) => element.innerText);

async function finished(name: string, input: unknown = {}): Promise<AgentTask> {
  return workflows.waitFor((await workflows.submit(name, input)).id, { timeoutMs: 20_000 });
}

it("shows a browser without the operator's credential only the guard's refusal", async () => {
  const { page, errors } = await openTab({ signedIn: false });
  const response = await page.goto(`${app.url}${MOUNT}`);
  expect(response!.status()).toBe(401);
  expect(await text(page, 'h1')).toBe('Sign-in needed');
  expect(await text(page, 'main')).toContain('Operators only: sign in first.');
  expect(await page.$('table')).toBeNull();
  // The 401 itself is the one console line a refused page has.
  expect(errors).toEqual([expect.stringMatching(/status of 401/)]);
  await page.close();
});

it('goes by keyboard from the list to a rolled-back task and shows its timeline and compensations', async () => {
  await finished('many-steps', { steps: 6 });
  const trip = await finished('trip', { traveller: 'ada' });
  await finished('shipment');
  expect(trip.status).toBe(TaskStatus.ROLLED_BACK);
  const { page, errors } = await openTab();
  await page.goto(`${app.url}${MOUNT}`);
  expect(await text(page, 'h1')).toBe('Tasks');
  await screenshotBothSchemes(page, SCREENSHOTS, 'tasks', { fullPage: true });

  await tabTo(page, `a[href="${MOUNT}/tasks/${trip.id}"]`);
  expect(await pressEnter(page)).toBe(200);
  expect(page.url()).toBe(`${app.url}${MOUNT}/tasks/${trip.id}`);
  expect(await text(page, 'h1 .badge')).toBe('rolled back');
  const steps = await page.$$eval('table.timeline tbody tr', (rows) =>
    rows.map((row) => [...row.querySelectorAll('td')].map((cell) => cell.innerText.trim())),
  );
  expect(steps.map((cells) => [cells[1], cells[2], cells[6]])).toEqual([
    ['book-flight', 'completed', '1'],
    ['book-hotel', 'completed', '1'],
    ['charge-card', 'failed', '2'],
  ]);
  expect(steps[2][8]).toContain('card declined by the bank');
  const compensations = await page.$$eval('h2 + table tbody tr', (rows) => rows.map((row) => row.textContent ?? ''));
  expect(compensations.filter((row) => row.includes('compensated'))).toHaveLength(2);

  // An output opens from the keyboard too: Tab to its expander, Enter.
  await tabTo(page, 'table.timeline details.value summary');
  await page.keyboard.press('Enter');
  expect(await page.$eval('table.timeline details.value', (details: any) => details.open)).toBe(true);
  await screenshotBothSchemes(page, SCREENSHOTS, 'task-rolled-back', { fullPage: true });
  expect(errors).toEqual([]);
  await page.close();
});

it('retries a dead letter once confirmed, and the task ends rolled back', async () => {
  const shipment = await finished('shipment');
  expect(shipment.status).toBe(TaskStatus.PARTIAL_ROLLBACK);
  const { page, errors } = await openTab();
  await page.goto(`${app.url}${MOUNT}/tasks/${shipment.id}`);
  expect(await text(page, 'h1 .badge')).toBe('partial rollback');
  expect(await page.$$('tr[id^="dead-letter-"]')).toHaveLength(1);
  await screenshotBothSchemes(page, SCREENSHOTS, 'dead-letter', { fullPage: true });

  await tabTo(page, 'tr[id^="dead-letter-"] a.button');
  expect(await pressEnter(page)).toBe(200);
  expect(await text(page, 'h1')).toBe('Retry this compensation?');
  expect((await workflows.get(shipment.id))!.status).toBe(TaskStatus.PARTIAL_ROLLBACK); // nothing happened yet
  await screenshotBothSchemes(page, SCREENSHOTS, 'confirm-retry', { fullPage: true });

  await tabTo(page, 'form button[type="submit"]');
  expect(await pressEnter(page)).toBe(200);
  expect(page.url()).toBe(`${app.url}${MOUNT}/tasks/${shipment.id}?notice=retried`);
  expect(await text(page, '.notice')).toContain('succeeded');
  expect(await text(page, 'h1 .badge')).toBe('rolled back');
  expect(await page.$$('tr[id^="dead-letter-"]')).toHaveLength(0);
  expect((await workflows.get(shipment.id))!.status).toBe(TaskStatus.ROLLED_BACK);
  expect(errors).toEqual([]);
  await page.close();
});

it('follows a task live while it runs, then cancels it with compensation once confirmed', async () => {
  const task = await workflows.submit('approval', {}, { scheduledAt: new Date(Date.now() + 3_600_000) });
  const { page, errors } = await openTab();
  await page.goto(`${app.url}${MOUNT}/tasks/${task.id}`);
  expect(await text(page, 'h1 .badge')).toBe('pending');
  await page.waitForFunction(() => document.getElementById('live-state')?.textContent?.startsWith('Live'));
  await page.evaluate(() => (window.sameDocument = true));

  // The task becomes due: a worker runs it, and the open page follows without a reload.
  await bed.db.client.query(`UPDATE agent_tasks SET scheduled_at = now() WHERE id = $1`, [task.id]);
  await page.waitForFunction(() => document.querySelector('h1 .badge')?.textContent === 'running', { timeout: 20_000 });
  await page.waitForFunction(() => document.querySelectorAll('table.timeline tbody tr').length === 1, { timeout: 20_000 });
  expect(await page.evaluate(() => window.sameDocument)).toBe(true);
  expect(await text(page, 'table.timeline tbody tr td.key')).toBe('prepare');
  await screenshotBothSchemes(page, SCREENSHOTS, 'task-live', { fullPage: true });

  await tabTo(page, `a[href="${MOUNT}/tasks/${task.id}/cancel?compensate=true"]`);
  expect(await pressEnter(page)).toBe(200);
  expect(await text(page, 'h1')).toBe('Cancel and compensate this task?');
  await screenshotBothSchemes(page, SCREENSHOTS, 'confirm-cancel', { fullPage: true });
  expect((await workflows.get(task.id))!.status).toBe(TaskStatus.RUNNING);

  await tabTo(page, 'form button[type="submit"]');
  expect(await pressEnter(page)).toBe(200);
  expect(await text(page, '.notice')).toContain('cancelled and its completed steps were compensated');
  expect(await text(page, 'h1 .badge')).toBe('cancelled');
  expect((await workflows.getStep(task.id, 'prepare'))!.compensatedAt).toBeInstanceOf(Date);
  expect(errors).toEqual([]);
  await page.close();
});

it('finds a task the determinism guard holds from the list, and resumes it once confirmed on fixed code', async () => {
  // A crashed run recovered on code that asks for C before the recorded B: held (determinism-guard.spec.ts).
  const id = await crashedRunOnReorderedCode(bed.db.client);
  await eventually(`task ${id} is held`, () => workflows.get(id), { until: (task) => task?.heldAt instanceof Date });
  const { page, errors } = await openTab();
  await page.goto(`${app.url}${MOUNT}`);
  await tabTo(page, 'a[data-status="held"]');
  expect(await pressEnter(page)).toBe(200);
  expect(page.url()).toBe(`${app.url}${MOUNT}?held=true`);
  expect(await page.$$eval('table tbody tr', (rows) => rows.map((row) => row.querySelector('a')?.textContent))).toEqual([id]);
  await tabTo(page, `a[href="${MOUNT}/tasks/${id}"]`);
  expect(await pressEnter(page)).toBe(200);
  expect(await text(page, 'main')).toContain('held by the determinism guard');
  await screenshotBothSchemes(page, SCREENSHOTS, 'task-held', { fullPage: true });

  await tabTo(page, `a[href="${MOUNT}/tasks/${id}/resume"]`);
  expect(await pressEnter(page)).toBe(200);
  expect(await text(page, 'h1')).toBe('Resume this held task?');
  const divergence = await page.$$eval('.confirm dl.facts dd', (cells) => cells.map((cell: any) => cell.innerText.trim()));
  expect(divergence).toEqual(['B', 'C']);
  expect((await workflows.get(id))!.heldAt).toBeInstanceOf(Date); // nothing happened yet
  await screenshotBothSchemes(page, SCREENSHOTS, 'confirm-resume', { fullPage: true });

  deployed.code = 'original'; // the fix is deployed
  await tabTo(page, 'form button[type="submit"]');
  expect(await pressEnter(page)).toBe(200);
  expect(page.url()).toBe(`${app.url}${MOUNT}/tasks/${id}?notice=resumed`);
  expect(await text(page, '.notice')).toContain('The hold was cleared');
  // The page follows the resumed run live to its end.
  await page.waitForFunction(() => document.querySelector('h1 .badge')?.textContent === 'completed', { timeout: 20_000 });
  expect((await workflows.get(id))!.output).toEqual(['A-done', 'B-done', 'C-done']);
  expect(deployed.ran).toEqual(['C']);
  expect(errors).toEqual([]);
  await page.close();
});

it('forks a completed task from a step row, and bulk-cancels the tasks a filtered list shows after counting them', async () => {
  const original = await finished('many-steps', { steps: 3 });
  const { page, errors } = await openTab();
  await page.goto(`${app.url}${MOUNT}/tasks/${original.id}`);
  await tabTo(page, `a[href="${MOUNT}/tasks/${original.id}/fork?step=step-002"]`);
  expect(await pressEnter(page)).toBe(200);
  expect(await text(page, 'h1')).toBe('Fork this task from step “step-002”?');
  await screenshotBothSchemes(page, SCREENSHOTS, 'confirm-fork', { fullPage: true });
  await tabTo(page, 'form button[type="submit"]');
  expect(await pressEnter(page)).toBe(200);
  const forkId = /\/tasks\/([0-9a-f-]{36})\?notice=forked$/.exec(page.url())![1];
  expect(forkId).not.toBe(original.id);
  expect(await page.$eval('[data-forked-from]', (link: any) => link.getAttribute('data-forked-from'))).toBe(original.id);
  await page.waitForFunction(() => document.querySelector('h1 .badge')?.textContent === 'completed', { timeout: 20_000 });

  const later = new Date(Date.now() + 3_600_000);
  const waiting = [
    await workflows.submit('odd-key', {}, { scheduledAt: later }),
    await workflows.submit('odd-key', {}, { scheduledAt: later }),
  ];
  await page.goto(`${app.url}${MOUNT}?workflow=odd-key&status=pending`);
  await tabTo(page, 'a[href^="' + MOUNT + '/bulk/cancel?"]');
  expect(await pressEnter(page)).toBe(200);
  expect(await text(page, 'h1')).toBe('Cancel the tasks that match?');
  expect(await text(page, '[data-matched]')).toBe('2');
  await screenshotBothSchemes(page, SCREENSHOTS, 'confirm-bulk-cancel', { fullPage: true });
  for (const task of waiting) expect((await workflows.get(task.id))!.status).toBe(TaskStatus.PENDING);
  await tabTo(page, 'form button[type="submit"]');
  expect(await pressEnter(page)).toBe(200);
  expect(await text(page, '[data-changed]')).toBe('2');
  for (const task of waiting) expect((await workflows.get(task.id))!.status).toBe(TaskStatus.CANCELLED);
  expect(errors).toEqual([]);
  await page.close();
});

describe('another site', () => {
  let open: TestHttpApp;
  let attacker: Server;

  beforeAll(async () => {
    open = await startDashboardApp(bed, { guards: [] }); // no guard: the CSRF check alone stands in the way
  });
  afterAll(async () => {
    // As above: the browser's connections are cut first.
    attacker?.closeAllConnections();
    await new Promise((done) => attacker?.close(done));
    open.app.getHttpServer().closeAllConnections();
    await bed.close(open);
  });

  it('cannot make a browser cancel a task: its form post is refused (CSRF)', async () => {
    const task = await open.app.get(WorkflowService).submit('approval', {}, { scheduledAt: new Date(Date.now() + 3_600_000) });
    const target = `${open.url}${MOUNT}/tasks/${task.id}/cancel`;
    attacker = createServer((_request, response) => {
      response.setHeader('content-type', 'text/html');
      response.end(`<!doctype html><form method="post" action="${target}"></form><script>document.forms[0].submit()</script>`);
    });
    await new Promise<void>((listening) => attacker.listen(0, '127.0.0.1', listening));
    // localhost and 127.0.0.1 are different sites to the browser.
    const attackerUrl = `http://localhost:${(attacker.address() as AddressInfo).port}/`;
    const page = await chromium.browser.newPage();
    const [refused] = await Promise.all([page.waitForResponse((response) => response.url() === target), page.goto(attackerUrl)]);
    expect(refused.status()).toBe(403);
    await page.waitForFunction(() => document.querySelector('h1')?.textContent === 'Not allowed');
    expect(await text(page, 'main')).toContain('This action was sent from another site and was refused.');
    expect((await workflows.get(task.id))!.status).toBe(TaskStatus.PENDING);
    await page.close();
  });
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

  it('mounts the dashboard at /duraflow behind its API key, with a sign-in form for browsers', async () => {
    const { page, errors } = await openTab({ signedIn: false });
    const refused = await page.goto(`${engine.httpUrl}/duraflow`);
    expect(refused!.status()).toBe(401);
    expect(await text(page, 'main')).toContain('sign in with it (DURAFLOW_API_KEY)');

    await tabTo(page, 'a[href="/duraflow/login"].button');
    expect(await pressEnter(page)).toBe(200);
    await page.keyboard.type('not-the-key'); // the key field has the focus
    expect(await pressEnter(page)).toBe(401);
    expect(await text(page, '[role="alert"]')).toContain('not the engine');
    await page.type('#api-key', 'operator-key-1');
    await screenshotBothSchemes(page, SCREENSHOTS, 'sign-in', { fullPage: true });
    expect(await pressEnter(page)).toBe(200);
    expect(page.url()).toBe(`${engine.httpUrl}/duraflow`);
    expect(await text(page, 'h1')).toBe('Tasks');

    const cookies = await page.cookies();
    expect(cookies.find((cookie) => cookie.name === 'duraflow_session')).toMatchObject({
      httpOnly: true,
      sameSite: 'Strict',
      path: '/duraflow',
    });
    expect(cookies.find((cookie) => cookie.name === 'duraflow_session')!.value).not.toContain('operator-key-1');
    // The cookie opens the dashboard, not the API.
    expect((await fetch(`${engine.httpUrl}/tasks`, { headers: { cookie: `duraflow_session=${cookies[0].value}` } })).status).toBe(401);

    const submitted = await fetch(`${engine.httpUrl}/tasks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'operator-key-1' },
      body: JSON.stringify({ workflowName: 'booking', input: { customer: 'ada', from: 'AMS', to: 'LIS', failAt: 'car' } }),
    });
    const booking = (await submitted.json()) as { id: string };
    await workflows.waitFor(booking.id, { timeoutMs: 20_000 });
    await page.goto(`${engine.httpUrl}/duraflow/tasks/${booking.id}`);
    expect(await text(page, 'h1 .badge')).toBe('rolled back');
    expect(errors.filter((error) => !/status of 401/.test(error))).toEqual([]);
    await page.close();
  });
});
