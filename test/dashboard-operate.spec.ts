import { AgentTask, TaskStatus, WorkflowService } from '@duraflow/nestjs';
import { ODD_STEP_KEY, OPERATOR_HEADERS, startDashboardApp } from './fixtures/dashboard/dashboard-app';
import { TestHttpApp, useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/** The dashboard's operator actions over HTTP: retry a task, fork it from a step, bulk actions on a filtered list. */

const MOUNT = '/ops/duraflow';
/** What a browser sends with a form posted from the dashboard's own page. */
const SAME_ORIGIN = { 'sec-fetch-site': 'same-origin' };
const FORGED: Array<Record<string, string>> = [
  { 'sec-fetch-site': 'cross-site' },
  { 'sec-fetch-site': 'same-site' },
  { origin: 'http://evil.example' },
];
const LATER = () => new Date(Date.now() + 3_600_000);

const bed = useTestBed();
let app: TestHttpApp;
let workflows: WorkflowService;

beforeAll(async () => {
  app = await startDashboardApp(bed, { pageSize: 3 });
  workflows = app.app.get(WorkflowService);
});

async function request(path: string, options: { method?: string; headers?: Record<string, string> } = {}) {
  const response = await fetch(`${app.url}${path}`, {
    method: options.method ?? 'GET',
    redirect: 'manual',
    headers: { ...OPERATOR_HEADERS, ...options.headers },
  });
  return { status: response.status, text: await response.text(), headers: response.headers };
}

/** An `approval` task whose `prepare` step completed, then cancelled without compensation: retryable. */
async function cancelledApproval(): Promise<AgentTask> {
  const task = await workflows.submit('approval', {});
  await eventually('its prepare step completed', () => workflows.getStepSummaries(task.id), {
    until: (steps) => steps.some((step) => step.stepKey === 'prepare' && step.status === 'completed'),
  });
  return workflows.cancel(task.id);
}

const status = async (id: string) => (await workflows.get(id))!.status;

describe('retry', () => {
  it('offers Retry on a cancelled task, confirms on a GET page, retries only on the POST and shows the history', async () => {
    const task = await cancelledApproval();
    const taskPage = await request(`${MOUNT}/tasks/${task.id}`);
    expect(taskPage.text).toContain(`href="${MOUNT}/tasks/${task.id}/retry">Retry…</a>`);

    const confirm = await request(`${MOUNT}/tasks/${task.id}/retry`);
    expect(confirm.status).toBe(200);
    expect(confirm.text).toContain(`<form method="post" action="${MOUNT}/tasks/${task.id}/retry"`);
    expect(confirm.text).toMatch(/completed step \(<code>prepare<\/code>\) are kept/);
    expect(await status(task.id)).toBe(TaskStatus.CANCELLED);

    for (const headers of FORGED) {
      const answer = await request(`${MOUNT}/tasks/${task.id}/retry`, { method: 'POST', headers });
      expect([headers, answer.status]).toEqual([headers, 403]);
    }
    expect(await status(task.id)).toBe(TaskStatus.CANCELLED);

    const done = await request(`${MOUNT}/tasks/${task.id}/retry`, { method: 'POST', headers: SAME_ORIGIN });
    expect(done.status).toBe(303);
    expect(done.headers.get('location')).toBe(`${MOUNT}/tasks/${task.id}?notice=task-retried`);
    expect(await status(task.id)).not.toBe(TaskStatus.CANCELLED);
    const after = await request(done.headers.get('location')!);
    expect(after.text).toContain('The task runs again from where it stopped');
    expect(after.text).toMatch(/History \(1\)[\s\S]*retried from <span class="badge s-cancelled">cancelled<\/span>/);
    await workflows.cancel(task.id);
  });

  it('shows the refusal of a task that cannot be retried, with its code, and changes nothing', async () => {
    const task = await workflows.waitFor((await workflows.submit('many-steps', { steps: 2 })).id, { timeoutMs: 20_000 });
    expect((await request(`${MOUNT}/tasks/${task.id}`)).text).not.toContain('Retry…');
    const refused = await request(`${MOUNT}/tasks/${task.id}/retry`, { method: 'POST', headers: SAME_ORIGIN });
    expect(refused.status).toBe(409);
    expect(refused.text).toContain('TASK_NOT_RETRYABLE');
    expect(await status(task.id)).toBe(TaskStatus.COMPLETED);
    expect((await request(`${MOUNT}/tasks/00000000-0000-4000-8000-000000000000/retry`)).status).toBe(404);
  });
});

describe('fork from here', () => {
  it('links every step row to a confirmation, forks only on the POST and goes to the new task, which names its original', async () => {
    const original = await workflows.waitFor((await workflows.submit('many-steps', { steps: 4 })).id, { timeoutMs: 20_000 });
    const page = await request(`${MOUNT}/tasks/${original.id}`);
    for (const key of ['step-001', 'step-002', 'step-003', 'step-004']) {
      expect(page.text).toMatch(new RegExp(`href="${MOUNT}/tasks/${original.id}/fork\\?step=${key}"[^>]*>Fork from here…</a>`));
    }
    const before = (await workflows.list({ limit: 1000 })).items.length;

    const confirm = await request(`${MOUNT}/tasks/${original.id}/fork?step=step-003`);
    expect(confirm.status).toBe(200);
    expect(confirm.text).toContain(`action="${MOUNT}/tasks/${original.id}/fork?step=step-003"`);
    expect(confirm.text).toMatch(/The 2 steps recorded before it \(<code>step-001<\/code>, <code>step-002<\/code>\) are copied/);
    for (const headers of FORGED) {
      expect((await request(`${MOUNT}/tasks/${original.id}/fork?step=step-003`, { method: 'POST', headers })).status).toBe(403);
    }
    expect((await workflows.list({ limit: 1000 })).items.length).toBe(before);

    const done = await request(`${MOUNT}/tasks/${original.id}/fork?step=step-003`, { method: 'POST', headers: SAME_ORIGIN });
    expect(done.status).toBe(303);
    const [, forkId] = new RegExp(`^${MOUNT}/tasks/([0-9a-f-]{36})\\?notice=forked$`).exec(done.headers.get('location')!)!;
    expect(forkId).not.toBe(original.id);
    expect((await workflows.get(forkId))!.forkedFrom).toEqual({ taskId: original.id, fromStep: 'step-003' });
    const forkPage = await request(`${MOUNT}/tasks/${forkId}`);
    expect(forkPage.text).toContain(`<a href="${MOUNT}/tasks/${original.id}" data-forked-from="${original.id}">`);
    expect(forkPage.text).toContain('(from step <code>step-003</code>)');
  });

  it('escapes an odd step key in the link, and answers 404 for a step the task does not have', async () => {
    const task = await workflows.waitFor((await workflows.submit('odd-key', {})).id, { timeoutMs: 20_000 });
    const page = await request(`${MOUNT}/tasks/${task.id}`);
    const href = `${MOUNT}/tasks/${task.id}/fork?${new URLSearchParams({ step: ODD_STEP_KEY }).toString()}`;
    expect(page.text).toContain(`href="${href.replace(/&/g, '&amp;')}"`);
    expect(page.text).not.toContain(ODD_STEP_KEY);
    const confirm = await request(`${MOUNT}/tasks/${task.id}/fork?step=${encodeURIComponent(ODD_STEP_KEY)}`);
    expect(confirm.status).toBe(200);
    expect(confirm.text).not.toContain(ODD_STEP_KEY);
    expect((await request(`${MOUNT}/tasks/${task.id}/fork?step=nope`)).status).toBe(404);
  });
});

describe('bulk actions on a filtered list', () => {
  it('counts the matching tasks on the confirmation page (a dry run), changes nothing before the POST, then reports what it changed', async () => {
    const since = new Date(Date.now() - 1000);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await workflows.submit('odd-key', {}, { scheduledAt: LATER() })).id);
    const filter = `workflow=odd-key&status=pending&from=${encodeURIComponent(since.toISOString())}`;

    const list = await request(`${MOUNT}?${filter}`);
    const cancelLink = `${MOUNT}/bulk/cancel?status=pending&amp;workflow=odd-key&amp;from=${encodeURIComponent(since.toISOString())}`;
    expect(list.text).toContain(`href="${cancelLink}">Cancel all…</a>`);
    expect((await request(MOUNT)).text).not.toContain('Cancel all…'); // no filter, no bulk action

    const confirm = await request(`${MOUNT}/bulk/cancel?${filter}`);
    expect(confirm.status).toBe(200);
    expect(confirm.text).toContain('<strong data-matched="3">3</strong>');
    expect(confirm.text).toContain(`<form method="post" action="${cancelLink}"`);
    for (const id of ids) expect(await status(id)).toBe(TaskStatus.PENDING);

    for (const headers of FORGED) expect((await request(`${MOUNT}/bulk/cancel?${filter}`, { method: 'POST', headers })).status).toBe(403);
    for (const id of ids) expect(await status(id)).toBe(TaskStatus.PENDING);

    const done = await request(`${MOUNT}/bulk/cancel?${filter}`, { method: 'POST', headers: SAME_ORIGIN });
    expect(done.status).toBe(200);
    expect(done.text).toMatch(/Matched <strong data-matched="3">3<\/strong>, changed\s+<strong data-changed="3">3<\/strong>/);
    for (const id of ids) expect(await status(id)).toBe(TaskStatus.CANCELLED);

    const retryFilter = `workflow=odd-key&status=cancelled&from=${encodeURIComponent(since.toISOString())}`;
    expect((await request(`${MOUNT}/bulk/retry?${retryFilter}`)).text).toContain('<strong data-matched="3">3</strong>');
    const retried = await request(`${MOUNT}/bulk/retry?${retryFilter}`, { method: 'POST', headers: SAME_ORIGIN });
    expect(retried.text).toContain('<strong data-changed="3">3</strong>');
    for (const id of ids) expect(await status(id)).not.toBe(TaskStatus.CANCELLED);
  });

  it('refuses an unknown action, unreadable filters and held with cancel (400), and shows the library refusal of an empty filter', async () => {
    expect((await request(`${MOUNT}/bulk/delete?workflow=odd-key`)).status).toBe(400);
    expect((await request(`${MOUNT}/bulk/cancel?status=sleeping`)).status).toBe(400);
    const held = await request(`${MOUNT}/bulk/cancel?held=true`);
    expect(held.status).toBe(400);
    expect(held.text).toContain('goes with resume only');
    const empty = await request(`${MOUNT}/bulk/cancel`);
    expect(empty.status).toBe(400);
    expect(empty.text).toContain('INVALID_BULK_FILTER');
    expect((await request(`${MOUNT}/bulk/resume?held=true`)).text).toContain('<strong data-matched="0">0</strong>');
  });
});
