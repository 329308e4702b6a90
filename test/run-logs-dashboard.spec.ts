import { TaskStatus, WorkflowService } from '@duraflow/nestjs';
import { OPERATOR_HEADERS, startDashboardApp } from './fixtures/dashboard/dashboard-app';
import { useTestBed } from './support/test-bed';

/* The dashboard's task page shows the first page of the run's ctx.log lines beside its steps. */

const bed = useTestBed();

describe('run logs on the dashboard', () => {
  it('lists the lines with level, step and attempt, escaped, and says where the rest is', async () => {
    const app = await startDashboardApp(bed, { pageSize: 2 });
    const workflows = app.app.get(WorkflowService);
    const task = await workflows.submit('trip', {});
    const done = await workflows.waitFor(task.id, { timeoutMs: 20_000 });
    expect(done.status).not.toBe(TaskStatus.PENDING);
    await bed.db.client.query(
      `INSERT INTO task_logs (task_id, seq, level, message, metadata, step_key, attempt, logged_at)
       VALUES ($1, 1001, 'warn', '<b>charged</b>', '{"amount":42}', 'charge', 2, now()),
              ($1, 1002, 'info', 'done', NULL, NULL, NULL, now()), ($1, 1003, 'info', 'later', NULL, NULL, NULL, now())`,
      [task.id],
    );

    const response = await fetch(`${app.url}/ops/duraflow/tasks/${task.id}`, { headers: OPERATOR_HEADERS });
    const page = await response.text();

    expect(response.status).toBe(200);
    const section = page.slice(page.indexOf('<h2>Logs'));
    expect(section).toMatch(/^<h2>Logs \(2 shown\)<\/h2>/);
    expect(section).toContain('&lt;b&gt;charged&lt;/b&gt;');
    expect(section).toContain('<code>charge</code> #2');
    expect(section).toContain('{&quot;amount&quot;:42}');
    expect(section).toContain('afterSeq=1002');
  });
});
