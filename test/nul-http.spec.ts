import { http, startTestEngine } from './fixtures/engine/engine-app';
import { OPERATOR_HEADERS, startDashboardApp } from './fixtures/dashboard/dashboard-app';
import { Logger } from '@nestjs/common';
import { CapturedLogs } from './support/captured-logs';
import { useTestBed } from './support/test-bed';
import { RunningEngine } from '../src/engine';

/**
 * Issue 35.8, the HTTP side: a NUL character (which PostgreSQL cannot store in text) anywhere in
 * a request, query string, path, JSON body or form, is refused with 400 before any SQL runs, with
 * no ERROR logged; and an unexpected failure never shows the database's text to the caller, only
 * a request id that finds the detail in the log.
 */

const BOOKING = { customer: 'ada', from: 'AMS', to: 'LIS' };
const NUL = '\u0000';

describe('the engine', () => {
  const bed = useTestBed();
  let engine: RunningEngine;
  const logs = new CapturedLogs();
  let taskId: string;

  beforeAll(async () => {
    engine = await startTestEngine(bed, {}, { logger: logs });
    const approval = await http(engine, 'POST', '/tasks', { body: { workflowName: 'approval', input: { request: 'r-1' } } });
    taskId = approval.body.id;
  });

  const errors = () => logs.lines.filter((line) => line.startsWith('ERROR'));

  it.each([
    ['GET', '/tasks?workflowName=a%00b', undefined],
    ['GET', '/tasks?cursor=a%00b', undefined],
    ['GET', '/dead-letters?cursor=%00', undefined],
    ['GET', '/tasks/a%00b', undefined],
    ['POST', '/tasks', { workflowName: 'booking', input: { ...BOOKING, customer: `a${NUL}b` } }],
    ['POST', '/tasks', { workflowName: 'booking', input: { ...BOOKING, [`k${NUL}`]: 1 } }],
    ['POST', '/tasks', { workflowName: 'booking', input: BOOKING, idempotencyKey: `order${NUL}1` }],
    ['POST', '/tasks', { workflowName: `booking${NUL}`, input: BOOKING }],
    ['POST', 'SIGNAL/approval', { payload: { approved: true, by: `ada${NUL}` } }],
    ['POST', 'SIGNAL/appro%00val', { payload: {} }],
  ])('refuses %s %s with a NUL in it: 400, nothing logged as an error', async (method, path, body) => {
    const url = path.startsWith('SIGNAL') ? path.replace('SIGNAL', `/tasks/${taskId}/signals`) : path;
    const before = errors().length;
    const answer = await http(engine, method, url, { body });
    expect([url, answer.status]).toEqual([url, 400]);
    expect(answer.body).toMatchObject({ code: 'INVALID_REQUEST', message: expect.stringContaining('must not contain a NUL character') });
    expect(JSON.stringify(answer.body)).not.toMatch(/byte sequence|unsupported Unicode|0x00/);
    expect(errors().slice(before)).toEqual([]);
  });

  it('refuses a NUL in the dashboard: the list filter and a step key, with a 400 page and no database text', async () => {
    for (const path of ['/duraflow?workflow=a%00b', `/duraflow/tasks/${taskId}/steps/a%00b/output`, '/duraflow?cursor=%00']) {
      const before = errors().length;
      const answer = await fetch(`${engine.httpUrl}${path}`);
      const text = await answer.text();
      expect([path, answer.status]).toEqual([path, 400]);
      expect(text).toContain('NUL');
      expect(text).not.toMatch(/byte sequence|0x00/);
      expect(errors().slice(before)).toEqual([]);
    }
  });
});

describe("the library's dashboard in a host app", () => {
  const bed = useTestBed();

  it('refuses a NUL in the query, the path or a form with a 400 page, before the database sees it', async () => {
    const app = await startDashboardApp(bed);
    const errors = jest.spyOn(Logger.prototype, 'error');
    try {
      for (const [method, path] of [
        ['GET', '/ops/duraflow?workflow=a%00b'],
        ['GET', '/ops/duraflow/tasks/00000000-0000-4000-8000-000000000000/steps/a%00b/output'],
        ['POST', '/ops/duraflow/tasks/00000000-0000-4000-8000-000000000000/signal'],
      ]) {
        const answer = await fetch(`${app.url}${path}`, {
          method,
          headers: { ...OPERATOR_HEADERS, 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
          body: method === 'POST' ? 'name=go%00&payload=' : undefined,
        });
        const text = await answer.text();
        expect([path, answer.status]).toEqual([path, 400]);
        expect(text).toContain('NUL character');
        expect(text).not.toMatch(/byte sequence|0x00/);
      }
      expect(errors).not.toHaveBeenCalled();
    } finally {
      errors.mockRestore();
    }
  });
});

describe('an unexpected failure', () => {
  const bed = useTestBed();

  /** A schema that no longer matches what the code reads: every read of a task fails in PostgreSQL. */
  async function breakTheSchema(): Promise<void> {
    await bed.db.client.query('ALTER TABLE agent_tasks RENAME COLUMN workflow_name TO workflow_name_gone');
    bed.beforeClosing(() => bed.db.client.query('ALTER TABLE agent_tasks RENAME COLUMN workflow_name_gone TO workflow_name'));
  }

  it("shows a request id on the dashboard's 500 page, never the database's text, which goes to the log", async () => {
    const app = await startDashboardApp(bed, {}, {});
    const errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    try {
      await breakTheSchema();
      const answer = await fetch(`${app.url}/ops/duraflow`, { headers: OPERATOR_HEADERS });
      const text = await answer.text();
      expect(answer.status).toBe(500);
      expect(text).not.toContain('workflow_name');
      const requestId = /request ([0-9a-f-]{36})/.exec(text)?.[1];
      expect(requestId).toBeDefined();
      const logged = errors.mock.calls.map((call) => String(call[0])).find((line) => line.includes(requestId!));
      expect(logged).toMatch(/column .*workflow_name.* does not exist/);
    } finally {
      errors.mockRestore();
    }
  });

  it("answers the API's 500 with a request id, and logs the cause under it", async () => {
    const logs = new CapturedLogs();
    const engine = await startTestEngine(bed, { DURAFLOW_WORKER: 'false' }, { logger: logs });
    await breakTheSchema();
    const answer = await http(engine, 'GET', '/tasks');
    expect(answer.status).toBe(500);
    expect(answer.body).toEqual({
      statusCode: 500,
      code: 'INTERNAL_ERROR',
      message: expect.stringMatching(/^Internal error: the engine's log has the cause under request [0-9a-f-]{36}\.$/),
      details: { requestId: expect.any(String) },
    });
    expect(JSON.stringify(answer.body)).not.toContain('workflow_name');
    expect(logs.text).toMatch(new RegExp(`Request ${answer.body.details.requestId} failed: .*column .*workflow_name.* does not exist`));
  });
});
