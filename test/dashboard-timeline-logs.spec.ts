import { DuraflowDashboardModule, TaskStatus, workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { OPERATOR_HEADERS, OperatorGuard } from './fixtures/dashboard/dashboard-app';
import { TestHttpApp, useTestBed } from './support/test-bed';

/*
 * The run's ctx.log lines on the task page's timeline: a mark per line the page read, at its time,
 * coloured by level, titled with level, step and message (escaped); the Logs table stays.
 */

const bed = useTestBed();

const HOSTILE = '<script>alert("log")</script>';

const loggedRun = workflow('timeline-logs', async (ctx: WorkflowContext) => {
  ctx.log.info(`starting ${HOSTILE}`);
  await ctx.step.run('charge', () => {
    ctx.log.warn('charged & "settled"');
    return { charged: true };
  });
  await ctx.step.run('notify', () => ctx.log.error('mailer down'));
  ctx.log.debug('done');
});

function serve(pageSize?: number): Promise<TestHttpApp> {
  return bed.serve({
    duraflow: { workflows: [loggedRun] },
    imports: [DuraflowDashboardModule.forRoot({ path: '/ops/duraflow', guards: [OperatorGuard], ...(pageSize && { pageSize }) })],
  });
}

/** The task page of a finished run of `timeline-logs`, and its run chart (the SVG). */
async function runAndRead(app: TestHttpApp): Promise<{ page: string; chart: string }> {
  const workflows = app.app.get(WorkflowService);
  const task = await workflows.submit('timeline-logs', {});
  expect((await workflows.waitFor(task.id, { timeoutMs: 20_000 })).status).toBe(TaskStatus.COMPLETED);
  const response = await fetch(`${app.url}/ops/duraflow/tasks/${task.id}`, { headers: OPERATOR_HEADERS });
  expect(response.status).toBe(200);
  const page = await response.text();
  const chart = page.match(/<svg class="run-timeline"[\s\S]*?<\/svg>/)?.[0];
  expect(chart).toBeDefined();
  return { page, chart: chart! };
}

/** Each log mark of the chart: its level's class, its x and its title. */
function logMarks(chart: string): Array<{ cls: string; x: number; title: string }> {
  return [...chart.matchAll(/<rect class="log-mark ([\w-]+)" data-seq="\d+" x="([\d.-]+)"[^>]*><title>([^<]*)<\/title><\/rect>/g)].map(
    ([, cls, x, title]) => ({ cls, x: Number(x), title }),
  );
}

describe('run logs on the task timeline', () => {
  it('marks each line on the time axis, coloured by level, with its level, step and message escaped in the title', async () => {
    const { page, chart } = await runAndRead(await serve());

    const marks = logMarks(chart);
    expect(marks.map(({ cls, title }) => ({ cls, title }))).toEqual([
      { cls: 'c-run', title: 'info · body · starting &lt;script&gt;alert(&quot;log&quot;)&lt;/script&gt;' },
      { cls: 'c-warn', title: 'warn · step charge #1 · charged &amp; &quot;settled&quot;' },
      { cls: 'c-bad', title: 'error · step notify #1 · mailer down' },
      { cls: 'c-wait', title: 'debug · body · done' },
    ]);
    const xs = marks.map((mark) => mark.x);
    expect(xs).toEqual([...xs].sort((a, b) => a - b));
    expect(chart).toContain('<g class="log-lane" aria-hidden="true"><text');
    expect(chart).toContain('4 log line(s) (listed under Logs)');
    expect(chart).not.toContain('style=');
    expect(page).not.toContain(HOSTILE);
    expect(page).toContain('<h2>Logs (4)</h2>');
  });

  it('marks only the lines the page read (its page size)', async () => {
    const { page, chart } = await runAndRead(await serve(2));

    expect(logMarks(chart).map((mark) => mark.title)).toEqual([
      'info · body · starting &lt;script&gt;alert(&quot;log&quot;)&lt;/script&gt;',
      'warn · step charge #1 · charged &amp; &quot;settled&quot;',
    ]);
    expect(chart).toContain('>ctx.log (2)</text>');
    expect(page).toContain('<h2>Logs (2 shown)</h2>');
  });
});
