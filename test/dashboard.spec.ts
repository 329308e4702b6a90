import { AgentTask, InvalidDashboardOptionsError, SagaService, TaskStatus, WorkflowService } from '@duraflow/nestjs';
import { resolveDashboardOptions } from '@duraflow/nestjs/dashboard';
import { crashedRunOnReorderedCode, ODD_STEP_KEY, OPERATOR_HEADERS, startDashboardApp } from './fixtures/dashboard/dashboard-app';
import { deployed, resetDeployed } from './fixtures/deploys/deployed-code';
import { TestHttpApp, useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/** The dashboard over HTTP, as a browser's requests reach it (the browser itself: dashboard-browser.spec.ts). */

const MOUNT = '/ops/duraflow';
/** What a browser sends with a form posted from the dashboard's own page. */
const SAME_ORIGIN = { 'sec-fetch-site': 'same-origin' };

const bed = useTestBed();
let app: TestHttpApp;
let workflows: WorkflowService;
let saga: SagaService;

beforeAll(async () => {
  app = await startDashboardApp(bed, { pageSize: 3 });
  workflows = app.app.get(WorkflowService);
  saga = app.app.get(SagaService);
});

interface Answer {
  status: number;
  text: string;
  headers: Headers;
}

async function request(
  path: string,
  options: { method?: string; auth?: boolean; headers?: Record<string, string>; on?: TestHttpApp } = {},
): Promise<Answer> {
  const response = await fetch(`${(options.on ?? app).url}${path}`, {
    method: options.method ?? 'GET',
    redirect: 'manual',
    headers: { ...(options.auth === false ? {} : OPERATOR_HEADERS), ...options.headers },
  });
  return { status: response.status, text: await response.text(), headers: response.headers };
}

/** Runs a task of `name` to its end. */
async function finished(name: string, input: unknown = {}): Promise<AgentTask> {
  const task = await workflows.submit(name, input);
  return workflows.waitFor(task.id, { timeoutMs: 20_000 });
}

/** An `approval` task, running, its `prepare` step completed. */
async function runningApproval(): Promise<AgentTask> {
  const task = await workflows.submit('approval', {});
  await eventually('its prepare step completed', () => workflows.getStepSummaries(task.id), {
    until: (steps) => steps.some((step) => step.stepKey === 'prepare'),
  });
  return (await workflows.get(task.id))!;
}

/** The ids of the tasks in a list page's table, in order. */
function listedTaskIds(html: string): string[] {
  return [...html.matchAll(/href="\/ops\/duraflow\/tasks\/([0-9a-f-]{36})"/g)].map((match) => match[1]);
}

function countOf(html: string, status: string): number {
  const match = new RegExp(`data-status="${status}">.*?<strong>(\\d+)</strong>`, 's').exec(html);
  if (!match) throw new Error(`No count for ${status}`);
  return Number(match[1]);
}

describe('guards', () => {
  it("answers every route, live updates and actions included, with the guard's 401 page and changes nothing", async () => {
    const task = await runningApproval();
    const routes: Array<[string, string]> = [
      ['GET', MOUNT],
      ['GET', `${MOUNT}/dead-letters`],
      ['GET', `${MOUNT}/tasks/${task.id}`],
      ['GET', `${MOUNT}/tasks/${task.id}/live`],
      ['GET', `${MOUNT}/tasks/${task.id}/events`],
      ['GET', `${MOUNT}/tasks/${task.id}/values/input`],
      ['GET', `${MOUNT}/tasks/${task.id}/steps/prepare/output`],
      ['GET', `${MOUNT}/tasks/${task.id}/cancel`],
      ['POST', `${MOUNT}/tasks/${task.id}/cancel`],
      ['POST', `${MOUNT}/tasks/${task.id}/cancel?compensate=true`],
      ['GET', `${MOUNT}/tasks/${task.id}/resume`],
      ['POST', `${MOUNT}/tasks/${task.id}/resume`],
      ['POST', `${MOUNT}/tasks/${task.id}/dead-letters/00000000-0000-4000-8000-000000000000/retry`],
    ];
    for (const [method, path] of routes) {
      const answer = await request(path, { method, auth: false, headers: SAME_ORIGIN });
      expect([method, path, answer.status]).toEqual([method, path, 401]);
      expect(answer.headers.get('content-type')).toMatch(/^text\/html/);
      expect(answer.text).toContain('Operators only: sign in first.');
      expect(answer.text).not.toContain('approval'); // nothing of the dashboard behind the guard
    }
    expect((await workflows.get(task.id))!.status).toBe(TaskStatus.RUNNING);
    await workflows.cancel(task.id);
  });
});

describe('the task list', () => {
  let trip: AgentTask;
  let shipment: AgentTask;
  let many: AgentTask;

  beforeAll(async () => {
    trip = await finished('trip', { traveller: 'ada' });
    shipment = await finished('shipment');
    many = await finished('many-steps', { steps: 12 });
  });

  it('shows counts by status and the newest tasks first, a page at a time', async () => {
    const first = await request(MOUNT);
    expect(first.status).toBe(200);
    const counts = await workflows.countByStatus();
    for (const status of Object.values(TaskStatus)) expect([status, countOf(first.text, status)]).toEqual([status, counts[status]]);
    expect(countOf(first.text, 'all')).toBe(Object.values(counts).reduce((a, b) => a + b, 0));

    const all = (await workflows.list({ limit: 1000 })).items.map((task) => task.id);
    const seen = listedTaskIds(first.text);
    expect(seen).toEqual(all.slice(0, 3));
    let next = /href="([^"]+)">Older tasks/.exec(first.text)?.[1];
    while (next) {
      const page = await request(next.replace(/&amp;/g, '&'));
      seen.push(...listedTaskIds(page.text));
      next = /href="([^"]+)">Older tasks/.exec(page.text)?.[1];
    }
    expect(seen).toEqual(all);
  });

  it('filters by status, workflow, creation time and goes straight to a task by id', async () => {
    expect(listedTaskIds((await request(`${MOUNT}?status=rolled_back&workflow=trip`)).text)).toEqual([trip.id]);
    expect(listedTaskIds((await request(`${MOUNT}?workflow=shipment`)).text)).toEqual([shipment.id]);
    const from = new Date(many.createdAt.getTime()).toISOString();
    expect(listedTaskIds((await request(`${MOUNT}?workflow=many-steps&from=${from}`)).text)).toEqual([many.id]);
    const before = new Date(many.createdAt.getTime()).toISOString().slice(0, 23); // datetime-local form: UTC, no zone
    expect(listedTaskIds((await request(`${MOUNT}?workflow=many-steps&to=${before}`)).text)).toEqual([]);
    const future = await request(`${MOUNT}?from=2999-01-01T00:00`);
    expect(future.text).toContain('No task matches these filters.');
    expect(countOf(future.text, 'all')).toBe(0);

    const byId = await request(`${MOUNT}?id=${trip.id.toUpperCase()}`);
    expect(byId.status).toBe(303);
    expect(byId.headers.get('location')).toBe(`${MOUNT}/tasks/${trip.id}`);
  });

  it('filters by tags (an AND of the pairs), shows them as chips on the rows and the task page, and keeps them in the bulk links', async () => {
    const later = new Date(Date.now() + 3_600_000);
    const eu = await workflows.submit('trip', { traveller: 'tag-eu' }, { scheduledAt: later, tags: { tenant: 'dash-acme', region: 'eu' } });
    const us = await workflows.submit('trip', { traveller: 'tag-us' }, { scheduledAt: later, tags: { tenant: 'dash-acme', region: 'us' } });
    const page = await request(`${MOUNT}?tag=tenant:dash-acme`);
    expect(listedTaskIds(page.text)).toEqual([us.id, eu.id]);
    expect(page.text).toContain(`href="${MOUNT}?tag=region%3Aeu"`);
    expect(page.text).toContain('<code>region:us</code>');
    expect(page.text).toMatch(/name="tag" value="tenant:dash-acme"/);
    expect(page.text).toMatch(/bulk\/cancel\?tag=tenant%3Adash-acme/);
    expect(listedTaskIds((await request(`${MOUNT}?tag=tenant:dash-acme%20region:eu`)).text)).toEqual([eu.id]);
    expect((await request(`${MOUNT}/tasks/${eu.id}`)).text).toContain('<code>tenant:dash-acme</code>');
    const confirm = await request(`${MOUNT}/bulk/cancel?tag=tenant%3Adash-acme%20region%3Aus`);
    expect(confirm.text).toContain('<code>tenant:dash-acme region:us</code>');
    expect(confirm.text).toMatch(/\b1 task/);
    await workflows.cancel(eu.id);
    await workflows.cancel(us.id);
  });

  it('explains a filter it cannot use (400) instead of guessing', async () => {
    const cases: Array<[string, RegExp]> = [
      ['?from=yesterday', /&quot;yesterday&quot; is not a time/],
      ['?status=stuck', /Unknown status &quot;stuck&quot;/],
      ['?id=abc', /&quot;abc&quot; is not a task id/],
      ['?id=00000000-0000-4000-8000-000000000000', /No task has the id 00000000-0000-4000-8000-000000000000/],
      ['?cursor=bogus', /Invalid list cursor/],
      ['?tag=tenant', /Tag .* must be written key:value/],
    ];
    for (const [query, message] of cases) {
      const answer = await request(`${MOUNT}${query}`);
      expect([query, answer.status]).toEqual([query, 400]);
      expect(answer.text).toMatch(message);
    }
  });
});

describe("a task's page", () => {
  it('shows the step timeline: each step with its times, attempts, output or error, and its compensation', async () => {
    const trip = await finished('trip', { traveller: 'ada' });
    expect(trip.status).toBe(TaskStatus.ROLLED_BACK);
    const steps = await workflows.getSteps(trip.id);
    const page = await request(`${MOUNT}/tasks/${trip.id}`);
    expect(page.status).toBe(200);
    const rows = Object.fromEntries(
      steps.map((step) => [step.stepKey, new RegExp(`<tr id="step-${step.id}">(.*?)</tr>`, 's').exec(page.text)?.[1] ?? '']),
    );
    expect(rows['book-flight']).toContain(`<time datetime="${steps[0].startedAt!.toISOString()}"`);
    expect(rows['book-flight']).toContain(`<time datetime="${steps[0].completedAt!.toISOString()}"`);
    expect(rows['book-flight']).toContain('&quot;flight&quot;: &quot;FL-2041&quot;');
    expect(rows['book-flight']).toMatch(/trip\.compensations\.book-flight.*compensated.*<time datetime="/s);
    expect(rows['charge-card']).toMatch(/<td class="num">2<\/td>/); // two attempts
    expect(rows['charge-card']).toContain('card declined by the bank');
    expect(page.text).toMatch(/<h2>Compensations<\/h2>.*book-hotel.*book-flight/s); // undone newest first
    // A value is text, never markup.
    expect(page.text).toContain('&lt;script&gt;alert(\\&quot;not markup\\&quot;)&lt;/script&gt;');
    expect(page.text).not.toContain('<script>alert');
    expect(page.headers.get('content-security-policy')).toMatch(/default-src 'none'; style-src 'sha256-[^']+'; script-src 'sha256-[^']+'/);
    expect(page.headers.get('cache-control')).toBe('no-store');
  });

  it('shows the workflow version a task started on, and a task the determinism guard holds', async () => {
    const task = await workflows.submit('trip', { traveller: 'bob' }, { scheduledAt: new Date(Date.now() + 3_600_000) });
    await bed.db.client.query(
      `UPDATE agent_tasks SET workflow_version = 3, held_at = now(),
         error = '{"code":"NON_DETERMINISM","name":"NonDeterminismError","message":"took another path","recordedStep":"B","requestedStep":"C"}'
       WHERE id = $1`,
      [task.id],
    );
    const page = await request(`${MOUNT}/tasks/${task.id}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('<code>trip</code> <span class="muted">v3</span>');
    expect(page.text).toContain('held by the determinism guard');
    expect(page.text).toContain('NON_DETERMINISM');
    expect(page.text).toContain(`<a class="button" href="${MOUNT}/tasks/${task.id}/resume">Resume…</a>`);
    await workflows.cancel(task.id);
    // Cancelled while held, it keeps its heldAt but is no longer held: no hold, no Resume.
    expect((await workflows.get(task.id))!.heldAt).toBeInstanceOf(Date);
    const cancelled = await request(`${MOUNT}/tasks/${task.id}`);
    expect(cancelled.text).not.toContain('held by the determinism guard');
    expect(cancelled.text).not.toContain('Resume…');
  });

  it('cuts a large output on the page and serves the whole value as JSON', async () => {
    const many = await finished('many-steps', { steps: 12 });
    const page = await request(`${MOUNT}/tasks/${many.id}`);
    expect(page.text.length).toBeLessThan(100_000); // a 400 KB output is on this page
    expect(page.text).toMatch(/The whole output \(JSON, 390\.6 KiB\)/);
    const href = new RegExp(`href="(${MOUNT}/tasks/${many.id}/steps/step-010/output)"`).exec(page.text)![1];
    const whole = await request(href);
    expect(whole.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(JSON.parse(whole.text)).toEqual({ blob: 'x'.repeat(400_000) });
    expect(JSON.parse((await request(`${MOUNT}/tasks/${many.id}/values/input`)).text)).toEqual({ steps: 12 });
    expect((await request(`${MOUNT}/tasks/${many.id}/steps/no-such-step/output`)).status).toBe(404);
  });

  it('escapes a step key in text and attributes, and encodes it in the link to its value', async () => {
    const task = await finished('odd-key');
    const page = await request(`${MOUNT}/tasks/${task.id}`);
    expect(page.text).toContain('<code>a&quot;b&#39;&lt;c&gt;&amp;d/e?f#g</code>');
    const href = `${MOUNT}/tasks/${task.id}/steps/${encodeURIComponent(ODD_STEP_KEY)}/output`;
    expect(page.text).toContain(`href="${href.replace(/&/g, '&amp;').replace(/'/g, '&#39;')}"`);
    expect(JSON.parse((await request(href)).text)).toEqual({ ok: true });
  });

  it('answers 404 with a page for an unknown task', async () => {
    const answer = await request(`${MOUNT}/tasks/00000000-0000-4000-8000-000000000000`);
    expect(answer.status).toBe(404);
    expect(answer.text).toContain('No task has the id 00000000-0000-4000-8000-000000000000');
  });
});

describe('actions', () => {
  it('asks for confirmation on a GET page and cancels with compensation only on the POST', async () => {
    const task = await runningApproval();
    const confirm = await request(`${MOUNT}/tasks/${task.id}/cancel?compensate=true`);
    expect(confirm.status).toBe(200);
    expect(confirm.text).toContain(`<form method="post" action="${MOUNT}/tasks/${task.id}/cancel?compensate=true"`);
    expect(confirm.text).toMatch(/1 compensation \(<code>prepare<\/code>\)/);
    expect((await workflows.get(task.id))!.status).toBe(TaskStatus.RUNNING);

    const done = await request(`${MOUNT}/tasks/${task.id}/cancel?compensate=true`, { method: 'POST', headers: SAME_ORIGIN });
    expect(done.status).toBe(303);
    expect(done.headers.get('location')).toBe(`${MOUNT}/tasks/${task.id}?notice=cancelled-compensated`);
    expect((await workflows.get(task.id))!.status).toBe(TaskStatus.CANCELLED);
    expect((await workflows.getStep(task.id, 'prepare'))!.compensatedAt).toBeInstanceOf(Date);
    expect((await request(done.headers.get('location')!)).text).toContain(
      'The task was cancelled and its completed steps were compensated',
    );

    const again = await request(`${MOUNT}/tasks/${task.id}/cancel`, { method: 'POST', headers: SAME_ORIGIN });
    expect(again.status).toBe(409);
    expect(again.text).toContain('TASK_ALREADY_FINISHED');
    expect(again.text).toContain(`Task &quot;${task.id}&quot; already finished with status &quot;cancelled&quot; and cannot be cancelled.`);
  });

  it('refuses a POST another site made the browser send (CSRF), and changes nothing', async () => {
    const task = await runningApproval();
    const forged: Array<Record<string, string>> = [
      { 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'same-site' },
      { origin: 'http://evil.example' },
      { origin: 'null' },
    ];
    for (const headers of forged) {
      const answer = await request(`${MOUNT}/tasks/${task.id}/cancel`, { method: 'POST', headers });
      expect([headers, answer.status]).toEqual([headers, 403]);
      expect(answer.text).toContain('This action was sent from another site and was refused.');
    }
    expect((await workflows.get(task.id))!.status).toBe(TaskStatus.RUNNING);
    const ownOrigin = await request(`${MOUNT}/tasks/${task.id}/cancel`, { method: 'POST', headers: { origin: app.url } });
    expect(ownOrigin.status).toBe(303);
    expect((await workflows.get(task.id))!.status).toBe(TaskStatus.CANCELLED);
  });

  it('retries and discards dead letters through SagaService, and shows a refusal as a message', async () => {
    const first = await finished('shipment');
    const second = await finished('shipment');
    expect([first.status, second.status]).toEqual([TaskStatus.PARTIAL_ROLLBACK, TaskStatus.PARTIAL_ROLLBACK]);
    const [retried] = (await saga.listDeadLetters({ taskId: first.id })).items;
    const [discarded] = (await saga.listDeadLetters({ taskId: second.id })).items;

    const confirm = await request(`${MOUNT}/tasks/${first.id}/dead-letters/${retried.id}/retry`);
    expect(confirm.text).toContain('Retry this compensation?');
    expect(confirm.text).toContain('shipment.compensations.reserve-stock');
    const retry = await request(`${MOUNT}/tasks/${first.id}/dead-letters/${retried.id}/retry`, { method: 'POST', headers: SAME_ORIGIN });
    expect(retry.headers.get('location')).toBe(`${MOUNT}/tasks/${first.id}?notice=retried`);
    expect((await workflows.get(first.id))!.status).toBe(TaskStatus.ROLLED_BACK);

    const gone = await request(`${MOUNT}/tasks/${first.id}/dead-letters/${retried.id}/retry`, { method: 'POST', headers: SAME_ORIGIN });
    expect(gone.status).toBe(404);
    expect(gone.text).toContain('DEAD_LETTER_NOT_FOUND');
    expect((await request(`${MOUNT}/tasks/${first.id}/dead-letters/${retried.id}/retry`)).status).toBe(404);

    const discard = await request(`${MOUNT}/tasks/${second.id}/dead-letters/${discarded.id}/discard`, {
      method: 'POST',
      headers: SAME_ORIGIN,
    });
    expect(discard.headers.get('location')).toBe(`${MOUNT}/tasks/${second.id}?notice=discarded`);
    expect((await workflows.get(second.id))!.status).toBe(TaskStatus.ROLLED_BACK);
    expect((await workflows.getStep(second.id, 'reserve-stock'))!.compensatedAt).toBeNull();
  });
});

describe('resuming a task the determinism guard holds', () => {
  /**
   * A run of the guarded workflow that crashed after recording A and B, recovered by this app's
   * worker on code that asks for C before B: the guard holds it (as in determinism-guard.spec.ts).
   */
  async function heldTask(): Promise<AgentTask> {
    const id = await crashedRunOnReorderedCode(bed.db.client);
    return (await eventually(`task ${id} is held`, () => workflows.get(id), { until: (task) => task?.heldAt instanceof Date }))!;
  }

  afterAll(() => resetDeployed('original'));

  it('shows the hold, asks for confirmation with the recorded and requested steps, and resumes only on the POST; the task then completes on fixed code', async () => {
    const held = await heldTask();
    expect(held.error).toMatchObject({ code: 'NON_DETERMINISM', recordedStep: 'B', requestedStep: 'C' });

    // Findable from the list: a count and a filter of its own, and a marker in its row.
    const list = await request(MOUNT);
    expect(countOf(list.text, 'held')).toBe(1); // the earlier tests leave no task held
    expect(await workflows.countHeld()).toBe(1);
    const heldOnly = await request(`${MOUNT}?held=true`);
    expect(heldOnly.status).toBe(200);
    expect(listedTaskIds(heldOnly.text)).toEqual([held.id]);
    expect((await workflows.list({ held: true })).items.map((task) => task.id)).toEqual([held.id]);
    expect((await workflows.list({ held: false, limit: 1000 })).items.map((task) => task.id)).not.toContain(held.id);
    expect(heldOnly.text).toMatch(
      new RegExp(
        `${held.id}</a></td>\\s*<td><code>guarded-trip</code></td>\\s*<td><span class="badge s-pending">pending</span> <span class="badge s-held">held</span>`,
      ),
    );
    expect((await request(`${MOUNT}?held=yes`)).status).toBe(400);
    await expect(workflows.list({ held: 'yes' as never })).rejects.toMatchObject({ code: 'INVALID_LIST_OPTIONS', option: 'held' });

    const taskPage = await request(`${MOUNT}/tasks/${held.id}`);
    expect(taskPage.text).toContain('held by the determinism guard');
    expect(taskPage.text).toContain(`<a class="button" href="${MOUNT}/tasks/${held.id}/resume">Resume…</a>`);

    const confirm = await request(`${MOUNT}/tasks/${held.id}/resume`);
    expect(confirm.status).toBe(200);
    expect(confirm.text).toContain('Resume this held task?');
    expect(confirm.text).toContain(`<form method="post" action="${MOUNT}/tasks/${held.id}/resume"`);
    expect(confirm.text).toMatch(/Recorded step not asked for<\/dt><dd><code>B<\/code>/);
    expect(confirm.text).toMatch(/Step the code asked for instead<\/dt><dd><code>C<\/code>/);
    expect(confirm.text).toContain('runs again on the code deployed now');
    expect(confirm.text).toContain('held again');
    expect((await workflows.get(held.id))!.heldAt).toBeInstanceOf(Date); // the GET changed nothing

    // Resumed while the code still diverges: held again, nothing run.
    const early = await request(`${MOUNT}/tasks/${held.id}/resume`, { method: 'POST', headers: SAME_ORIGIN });
    expect(early.status).toBe(303);
    expect(early.headers.get('location')).toBe(`${MOUNT}/tasks/${held.id}?notice=resumed`);
    await eventually('held again', () => workflows.get(held.id), { until: (task) => task?.heldAt instanceof Date && task.error !== null });
    expect(deployed.ran).toEqual([]);

    // The fix is deployed: resumed from the dashboard, it runs to its end.
    deployed.code = 'original';
    const resumed = await request(`${MOUNT}/tasks/${held.id}/resume`, { method: 'POST', headers: SAME_ORIGIN });
    expect(resumed.status).toBe(303);
    expect(resumed.headers.get('location')).toBe(`${MOUNT}/tasks/${held.id}?notice=resumed`);
    expect((await request(resumed.headers.get('location')!)).text).toContain('The hold was cleared');
    const done = await workflows.waitFor(held.id, { timeoutMs: 20_000 });
    expect(done).toMatchObject({ status: TaskStatus.COMPLETED, heldAt: null, output: ['A-done', 'B-done', 'C-done'] });
    expect(deployed.ran).toEqual(['C']);
  });

  it('shows no Resume for a task it does not hold, and answers a resume of one with TaskNotHeldError', async () => {
    const task = await runningApproval();
    const taskPage = await request(`${MOUNT}/tasks/${task.id}`);
    expect(taskPage.text).toContain('Cancel…');
    expect(taskPage.text).not.toContain('Resume…');
    expect(taskPage.text).not.toContain(`${MOUNT}/tasks/${task.id}/resume`);

    const confirm = await request(`${MOUNT}/tasks/${task.id}/resume`);
    expect(confirm.status).toBe(409);
    expect(confirm.text).toContain('Nothing to resume');
    const refused = await request(`${MOUNT}/tasks/${task.id}/resume`, { method: 'POST', headers: SAME_ORIGIN });
    expect(refused.status).toBe(409);
    expect(refused.text).toContain('TASK_NOT_HELD');
    expect(refused.text).toContain(`Task ${task.id} is not held by the determinism guard (status running): there is nothing to resume.`);
    expect((await workflows.get(task.id))!.status).toBe(TaskStatus.RUNNING);

    const unknown = await request(`${MOUNT}/tasks/00000000-0000-4000-8000-000000000000/resume`, { method: 'POST', headers: SAME_ORIGIN });
    expect(unknown.status).toBe(404);
    expect(unknown.text).toContain('TASK_NOT_FOUND');
    await workflows.cancel(task.id);
  });

  it('answers a resume of a task that is no longer held (cancelled meanwhile) with TaskNotHeldError', async () => {
    const held = await heldTask();
    const confirm = await request(`${MOUNT}/tasks/${held.id}/resume`);
    expect(confirm.status).toBe(200);
    await workflows.cancel(held.id); // another operator, between the confirmation page and its button
    const refused = await request(`${MOUNT}/tasks/${held.id}/resume`, { method: 'POST', headers: SAME_ORIGIN });
    expect(refused.status).toBe(409);
    expect(refused.text).toContain('TASK_NOT_HELD');
    expect(refused.text).toContain('(status cancelled)');
    expect(refused.text).toContain(`href="${MOUNT}/tasks/${held.id}"`);
    expect((await workflows.get(held.id))!.status).toBe(TaskStatus.CANCELLED);
  });

  it('refuses a resume another site made the browser send (CSRF), and the task stays held', async () => {
    const held = await heldTask();
    const forged: Array<Record<string, string>> = [{ 'sec-fetch-site': 'cross-site' }, { origin: 'http://evil.example' }];
    for (const headers of forged) {
      const answer = await request(`${MOUNT}/tasks/${held.id}/resume`, { method: 'POST', headers });
      expect([headers, answer.status]).toEqual([headers, 403]);
      expect(answer.text).toContain('This action was sent from another site and was refused.');
    }
    const still = (await workflows.get(held.id))!;
    expect(still.heldAt).toBeInstanceOf(Date);
    expect(still.error).toMatchObject({ code: 'NON_DETERMINISM' });
    await workflows.cancel(held.id);
  });
});

describe('live updates', () => {
  /** A server-sent event stream, read up to a given text at a time. */
  function eventReader(response: Response) {
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    return {
      /** Everything read so far once `until` is in it, or once the stream ended. */
      async readUntil(until: string): Promise<string> {
        while (!text.includes(until)) {
          const { value, done } = await reader.read();
          if (done) break;
          text += decoder.decode(value, { stream: true });
        }
        return text;
      },
    };
  }

  it("sends the task's progress as server-sent events while it runs and ends the stream when it finishes", async () => {
    const task = await runningApproval();
    const response = await fetch(`${app.url}${MOUNT}/tasks/${task.id}/events`, { headers: OPERATOR_HEADERS });
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const stream = eventReader(response);
    await stream.readUntil('event: progress');
    await workflows.cancel(task.id);
    const text = await stream.readUntil('event: end');
    const events = [...text.matchAll(/event: (\w+)\nid: \d+\ndata: (.*)\n/g)].map((match) => [match[1], JSON.parse(match[2]).status]);
    expect(events).toEqual([
      ['progress', 'running'],
      ['progress', 'cancelled'],
      ['end', 'cancelled'],
    ]);
  });

  it('ends open streams when the application closes, so closing never waits for a browser', async () => {
    const own = await startDashboardApp(bed);
    const task = await own.app.get(WorkflowService).submit('approval', {}, { scheduledAt: new Date(Date.now() + 3_600_000) });
    const response = await fetch(`${own.url}${MOUNT}/tasks/${task.id}/events`, { headers: OPERATOR_HEADERS });
    const stream = eventReader(response);
    await stream.readUntil('event: progress');
    await bed.close(own);
    await expect(stream.readUntil('never sent')).resolves.toContain('event: progress');
  });
});

describe('mounting', () => {
  it("puts the host's global prefix in every link", async () => {
    const prefixed = await startDashboardApp(bed, {}, { globalPrefix: 'api' });
    const task = await prefixed.app.get(WorkflowService).submit('trip', { traveller: 'bo' });
    const list = await request(`/api${MOUNT}`, { on: prefixed });
    expect(list.text).toContain(`href="/api${MOUNT}/tasks/${task.id}"`);
    expect(list.text).toContain(`<form class="filters" method="get" action="/api${MOUNT}"`);
    const page = await request(`/api${MOUNT}/tasks/${task.id}/`, { on: prefixed });
    expect(page.text).toContain(`href="/api${MOUNT}/dead-letters"`);
    expect((await request(`${MOUNT}`, { on: prefixed })).status).toBe(404);
  });

  it.each([
    [{ path: '/' }, 'path'],
    [{ path: '/ops/:id' }, 'path'],
    [{ path: '/a b' }, 'path'],
    [{ guards: [42] }, 'guards'],
    [{ loginUrl: 'javascript:alert(1)' }, 'loginUrl'],
    [{ loginUrl: '//evil.example/login' }, 'loginUrl'],
    [{ pageSize: 0 }, 'pageSize'],
    [{ previewChars: 10 }, 'previewChars'],
    [{ liveIntervalMs: 5 }, 'liveIntervalMs'],
    [{ title: '' }, 'title'],
  ])('refuses the option %p with InvalidDashboardOptionsError', (options, option) => {
    expect(() => resolveDashboardOptions(options as never)).toThrow(InvalidDashboardOptionsError);
    expect(() => resolveDashboardOptions(options as never)).toThrow(expect.objectContaining({ code: 'INVALID_DASHBOARD_OPTIONS', option }));
  });

  it('takes a path with or without its slashes', () => {
    expect(resolveDashboardOptions({ path: 'ops/workflows/' }).path).toBe('/ops/workflows');
    expect(resolveDashboardOptions().path).toBe('/duraflow');
  });
});
