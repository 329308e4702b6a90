import { WorkflowContext, WorkflowService, workflow } from '@duraflow/nestjs';
import { TestingModule } from '@nestjs/testing';
import { TASK_TALK_CHANNEL } from '../libs/duraflow/src/domain/duraflow.constants';
import { TaskNotifications } from '../libs/duraflow/src/notifications/task-notifications';
import { RunEventStore } from '../libs/duraflow/src/persistence/run-event.store';
import { RunTalkReader } from '../libs/duraflow/src/services/workflows/run-talk-reader';
import { SUBMIT_ONLY, useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/*
 * What wakes a waiting getEvent: the NOTIFY its task's setEvent sends at commit, heard on the
 * process's LISTEN connection. The reader's fallback poll (used while LISTEN is down) is set to
 * 10 minutes and getEvent's timeout to 60 s, so neither can be what resolves the wait before the
 * test's own 30 s timeout; the run parks after its setEvent, so no finished NOTIFY wakes it either.
 */

const bed = useTestBed({ databasePerTest: true });

/** Sets `ready` once signalled, then parks on a second signal: the run does not end, so only its talk NOTIFY wakes a reader. */
const ready = workflow('events-wakeup-ready', async (ctx: WorkflowContext) => {
  await ctx.waitForSignal('go');
  await ctx.setEvent('ready', { by: 'the run' });
  await ctx.waitForSignal('end');
});

const NO_POLL_MS = 10 * 60_000;

/**
 * The app's getEvent with its fallback poll out of reach, and its reads of the event as they
 * return (true: the event was there), to know that a getEvent read once, found nothing and waits.
 */
function reader(app: TestingModule) {
  app.get(RunTalkReader).pollWithoutListenMs = NO_POLL_MS;
  const events = app.get(RunEventStore);
  const get = events.get.bind(events);
  const reads: boolean[] = [];
  jest.spyOn(events, 'get').mockImplementation(async (...args) => {
    const read = await get(...args);
    reads.push(read.event !== undefined);
    return read;
  });
  return { workflows: app.get(WorkflowService), notifications: app.get(TaskNotifications), reads };
}

describe('getEvent wake-up', () => {
  it('is woken by the NOTIFY of the setEvent of a run in this process, not by a poll', async () => {
    const app = await bed.start({ duraflow: { workflows: [ready], worker: { shutdownTimeoutMs: 100 } } });
    const { workflows, notifications, reads } = reader(app);
    const task = await workflows.submit('events-wakeup-ready');
    const waiting = workflows.getEvent(task.id, 'ready', { timeoutMs: 60_000 });
    await eventually('getEvent read the event once, unset, and waits', () => reads.length === 1);
    expect(reads).toEqual([false]);
    expect(notifications.listening).toBe(true);
    await workflows.signal(task.id, 'go');
    expect(await waiting).toEqual({ by: 'the run' });
    expect(reads[reads.length - 1]).toBe(true);
  });

  it('is woken by the NOTIFY of a setEvent in another app on the database, while this one runs no worker', async () => {
    const { workflows, notifications, reads } = reader(await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [ready] } }));
    await bed.start({ duraflow: { workflows: [ready], worker: { shutdownTimeoutMs: 100 } } });
    const task = await workflows.submit('events-wakeup-ready');
    const waiting = workflows.getEvent(task.id, 'ready', { timeoutMs: 60_000 });
    await eventually('getEvent read the event once, unset, and waits', () => reads.length === 1);
    expect(reads).toEqual([false]);
    expect(notifications.listening).toBe(true);
    await workflows.signal(task.id, 'go');
    expect(await waiting).toEqual({ by: 'the run' });
  });

  it('is woken by a NOTIFY sent by SQL from another session, committed with the event it announces', async () => {
    const { workflows, notifications, reads } = reader(await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [ready] } }));
    const task = await workflows.submit('events-wakeup-ready');
    const waiting = workflows.getEvent(task.id, 'ready', { timeoutMs: 60_000 });
    await eventually('getEvent read the event once, unset, and waits', () => reads.length === 1);
    expect(reads).toEqual([false]);
    expect(notifications.listening).toBe(true);
    await bed.db.client.query('BEGIN');
    await bed.db.client.query(
      `INSERT INTO task_events (task_id, key, value, position, updated_at) VALUES ($1, 'ready', '{"by": "sql"}', 1, now())`,
      [task.id],
    );
    await bed.db.client.query(`SELECT pg_notify('${TASK_TALK_CHANNEL}', $1)`, [task.id]);
    await bed.db.client.query('COMMIT');
    expect(await waiting).toEqual({ by: 'sql' });
  });
});
