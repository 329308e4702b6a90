import { Logger } from '@nestjs/common';
import { InvalidDashboardOptionsError, TaskStatus, WorkflowService } from '@duraflow/nestjs';
import { resolveDashboardOptions } from '@duraflow/nestjs/dashboard';
import { OPERATOR_HEADERS, startDashboardApp } from './fixtures/dashboard/dashboard-app';
import { rawRequest } from './support/raw-http';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/** Issue 35.3 and 35.11: the library dashboard's allowed hosts, and its warning when mounted without guards. */

const MOUNT = '/ops/duraflow';
const REBOUND = 'rebind.attacker.example';

const bed = useTestBed();

/** The dashboard's warnings logged while `boot` ran (the Nest logger is spied on, not replaced). */
async function warningsDuring(boot: () => Promise<unknown>): Promise<string[]> {
  const warn = jest.spyOn(Logger.prototype, 'warn');
  try {
    await boot();
    return warn.mock.calls.filter((call) => call[1] === undefined).map((call) => String(call[0]));
  } finally {
    warn.mockRestore();
  }
}

const unguarded = (warnings: string[]) => warnings.filter((line) => line.includes('has no guards'));

describe('mounted without guards', () => {
  it('warns once at boot that every action is open, and says how to guard it or say the host does', async () => {
    const warnings = await warningsDuring(() => startDashboardApp(bed, { guards: [] }));
    expect(unguarded(warnings)).toEqual([
      expect.stringContaining(`The dashboard at ${MOUNT} has no guards: anyone who reaches this app can read every task and cancel`),
    ]);
    expect(unguarded(warnings)[0]).toContain('behindHostAuth: true');
  });

  it('stays quiet with guards, or when told the host authenticates', async () => {
    expect(unguarded(await warningsDuring(() => startDashboardApp(bed)))).toEqual([]);
    expect(unguarded(await warningsDuring(() => startDashboardApp(bed, { guards: [], behindHostAuth: true })))).toEqual([]);
  });
});

describe('allowedHosts', () => {
  it('answers 421 to a host it does not list, on pages and actions, before anything changes', async () => {
    const app = await startDashboardApp(bed, { allowedHosts: ['ops.example.com', 'localhost'] });
    const workflows = app.app.get(WorkflowService);
    const task = await workflows.submit('approval', {});
    await eventually('running', () => workflows.get(task.id), { until: (t) => t?.status === TaskStatus.RUNNING });
    const rebound = { ...OPERATOR_HEADERS, host: REBOUND, origin: `http://${REBOUND}` };

    const list = await rawRequest(`${app.url}${MOUNT}`, { headers: rebound });
    expect(list.status).toBe(421);
    expect(list.text).toContain('does not answer to the host name');
    expect(list.text).not.toContain(task.id);
    const cancel = await rawRequest(`${app.url}${MOUNT}/tasks/${task.id}/cancel`, { method: 'POST', headers: rebound });
    expect(cancel.status).toBe(421);
    expect((await workflows.get(task.id))!.status).toBe(TaskStatus.RUNNING);

    // Its own names, with any port, or the one given.
    for (const host of ['ops.example.com', 'OPS.example.com:8443', `localhost:${new URL(app.url).port}`]) {
      expect([host, (await rawRequest(`${app.url}${MOUNT}`, { headers: { ...OPERATOR_HEADERS, host } })).status]).toEqual([host, 200]);
    }
    const own = await rawRequest(`${app.url}${MOUNT}/tasks/${task.id}/cancel`, {
      method: 'POST',
      headers: { ...OPERATOR_HEADERS, host: 'ops.example.com', origin: 'https://ops.example.com' },
    });
    expect(own.status).toBe(303);
    expect((await workflows.get(task.id))!.status).toBe(TaskStatus.CANCELLED);
  });

  it('checks the list at forRoot', () => {
    for (const allowedHosts of [[], ['https://ops.example.com'], ['ops.example.com/path'], [''], 'localhost']) {
      expect(() => resolveDashboardOptions({ allowedHosts: allowedHosts as string[] })).toThrow(InvalidDashboardOptionsError);
    }
    expect(resolveDashboardOptions({ allowedHosts: ['Ops.Example.com:8443', '[::1]'] }).allowedHosts).toEqual([
      'ops.example.com:8443',
      '[::1]',
    ]);
  });
});
