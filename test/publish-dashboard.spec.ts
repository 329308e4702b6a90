import { workflow, WorkflowService } from '@duraflow/nestjs';
import { DuraflowDashboardModule } from '@duraflow/nestjs/dashboard';
import { OPERATOR_HEADERS, OperatorGuard } from './fixtures/dashboard/dashboard-app';
import { useTestBed } from './support/test-bed';

/* The dashboard's Events page: recent events with the task each started (or why not), and the open debounces and batches. */

const shipped = workflow('ship-order', async () => 'shipped', { on: 'order.paid' });
const digest = workflow('paid-digest', async () => 'digest', { on: 'order.paid', batch: { maxSize: 100, timeoutMs: 3_600_000 } });

describe('events on the dashboard', () => {
  const bed = useTestBed();

  it('lists the recent events with links to the tasks they started, and the batch still open', async () => {
    const app = await bed.serve({
      duraflow: { workflows: [shipped, digest] },
      imports: [DuraflowDashboardModule.forRoot({ path: '/ops/duraflow', guards: [OperatorGuard] })],
    });
    const workflows = app.app.get(WorkflowService);
    const paid = await workflows.publish('order.paid', { orderId: '<o-1>' });
    await workflows.publish('nobody.listens', {});
    const taskId = paid.deliveries.find((d) => d.workflowName === 'ship-order')!.taskId!;

    const response = await fetch(`${app.url}/ops/duraflow/events`, { headers: OPERATOR_HEADERS });
    const page = await response.text();
    expect(response.status).toBe(200);
    expect(page).toContain('aria-current="page">Events</a>');
    const recent = page.slice(page.indexOf('<h2>Recent events'));
    expect(recent).toContain(`href="/ops/duraflow/tasks/${taskId}"`);
    expect(recent).toContain('&lt;o-1&gt;');
    expect(recent).toContain('no workflow subscribes');
    const open = page.slice(page.indexOf('<h2>Open debounces'), page.indexOf('<h2>Recent events'));
    expect(open).toContain('paid-digest');
    expect(open).toMatch(/batch<\/td>/);

    const one = await (await fetch(`${app.url}/ops/duraflow/events?name=nobody.listens`, { headers: OPERATOR_HEADERS })).text();
    expect(one).not.toContain(`/ops/duraflow/tasks/${taskId}`);
  });
});
