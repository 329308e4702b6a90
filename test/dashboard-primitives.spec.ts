import { DuraflowDashboardModule, WorkflowContext, WorkflowService, workflow } from '@duraflow/nestjs';
import { OPERATOR_HEADERS, OperatorGuard } from './fixtures/dashboard/dashboard-app';
import { TestHttpApp, useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/** A task's sleeps, signals and children on its dashboard page, and the "send a signal" action (through WorkflowService.signal). */

const MOUNT = '/ops/duraflow';
const SAME_ORIGIN = { 'sec-fetch-site': 'same-origin' };

const kid = workflow('dash-kid', async (ctx: WorkflowContext) => ctx.step.run('k', () => 'k'));
const parent = workflow('dash-parent', async (ctx: WorkflowContext) => {
  await ctx.runChild('kid', 'dash-kid', {});
  return ctx.waitForSignal('go');
});

const bed = useTestBed();
let app: TestHttpApp;
let workflows: WorkflowService;

beforeAll(async () => {
  app = await bed.serve({
    duraflow: { workflows: [kid, parent] },
    imports: [DuraflowDashboardModule.forRoot({ path: MOUNT, guards: [OperatorGuard], liveIntervalMs: 200 })],
  });
  workflows = app.app.get(WorkflowService);
});

async function request(path: string, options: { method?: string; body?: string; headers?: Record<string, string> } = {}) {
  const response = await fetch(`${app.url}${path}`, {
    method: options.method ?? 'GET',
    redirect: 'manual',
    body: options.body,
    headers: { ...OPERATOR_HEADERS, ...options.headers },
  });
  return { status: response.status, text: await response.text(), headers: response.headers };
}

describe('the dashboard and the durable primitives', () => {
  it('shows what a task waits for, its children and its parent, and sends a signal from a form', async () => {
    const task = await workflows.submit('dash-parent');
    await eventually('the parent waits for its signal', async () =>
      (await workflows.getSteps(task.id)).some((step) => step.stepKey === 'signal:go#1' && step.status === 'waiting'),
    );
    const [child] = await workflows.getChildren(task.id);

    const page = await request(`${MOUNT}/tasks/${task.id}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('Children (1)');
    expect(page.text).toContain(`${MOUNT}/tasks/${child.id}`);
    expect(page.text).toMatch(/Waiting.*signal.*signal:go#1/s);
    // In the timeline, each primitive's row says what it is.
    expect(page.text).toContain('<td class="key"><code>signal:go#1</code><br><span class="muted kind">signal wait</span></td>');
    expect(page.text).toContain('<td class="key"><code>kid</code><br><span class="muted kind">child workflow</span></td>');
    expect(page.text).toContain(`${MOUNT}/tasks/${task.id}/signal`);
    const childPage = await request(`${MOUNT}/tasks/${child.id}`);
    expect(childPage.text).toContain(`${MOUNT}/tasks/${task.id}`);

    const form = await request(`${MOUNT}/tasks/${task.id}/signal`);
    expect(form.text).toContain('name="payload"');
    const notJson = await request(`${MOUNT}/tasks/${task.id}/signal`, {
      method: 'POST',
      body: new URLSearchParams({ name: 'go', payload: '{nope' }).toString(),
      headers: { ...SAME_ORIGIN, 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(notJson.status).toBe(400);
    expect(await workflows.getSignals(task.id)).toEqual([]);

    const sent = await request(`${MOUNT}/tasks/${task.id}/signal`, {
      method: 'POST',
      body: new URLSearchParams({ name: 'go', payload: '{"ok":true}' }).toString(),
      headers: { ...SAME_ORIGIN, 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(sent.status).toBe(303);
    expect(await workflows.waitFor(task.id, { timeoutMs: 10_000 })).toMatchObject({ status: 'completed', output: { ok: true } });
    const after = await request(`${MOUNT}/tasks/${task.id}`);
    expect(after.text).toContain('Signals (1)');
  });

  it('refuses a signal posted from another site, and sends nothing', async () => {
    const task = await workflows.submit('dash-parent');
    const refused = await request(`${MOUNT}/tasks/${task.id}/signal`, {
      method: 'POST',
      body: new URLSearchParams({ name: 'go', payload: '1' }).toString(),
      headers: { origin: 'http://evil.example', 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(refused.status).toBe(403);
    expect(await workflows.getSignals(task.id)).toEqual([]);
    await workflows.cancel(task.id);
  });
});
