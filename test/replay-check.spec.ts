import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ReplayCheckInputError } from '@duraflow/nestjs';
import { exportRecordedRuns, replayCheck } from '@duraflow/nestjs/replay';
import { writeFile } from 'node:fs/promises';
import { insertCrashedRun } from './fixtures/deploys/crashed-runs';
import { deployed, guardedWorkflow, resetDeployed } from './fixtures/deploys/deployed-code';
import { CLI_TIMEOUT_MS, duraflowCli as duraflow } from './support/duraflow-cli';
import { useTestBed } from './support/test-bed';

const FIXTURES = path.join(__dirname, 'fixtures', 'deploys');
const CHILD_TIMEOUT_MS = CLI_TIMEOUT_MS;

describe('The replay check', () => {
  const bed = useTestBed();
  /** Recorded runs of the original code: A; A, B; A, B, C (all unfinished); and a finished A, B. */
  const runs: Record<'onlyA' | 'aAndB' | 'all' | 'finished', string> = { onlyA: '', aAndB: '', all: '', finished: '' };
  let dir: string;

  beforeAll(async () => {
    runs.onlyA = await insertCrashedRun(bed.db.client, ['A']);
    runs.aAndB = await insertCrashedRun(bed.db.client, ['A', 'B']);
    runs.all = await insertCrashedRun(bed.db.client, ['A', 'B', 'C'], 'running');
    runs.finished = await insertCrashedRun(bed.db.client, ['A', 'B'], 'completed');
    dir = await mkdtemp(path.join(tmpdir(), 'duraflow-replay-'));
  });

  afterAll(() => rm(dir, { recursive: true, force: true }));

  async function tableSnapshot(): Promise<unknown[]> {
    const { rows } = await bed.db.client.query(
      `SELECT t.id, t.status, t.held_at, t.error, (SELECT count(*) FROM step_runs s WHERE s.task_id = t.id)::int AS steps
       FROM agent_tasks t ORDER BY t.id`,
    );
    return rows;
  }

  describe('programmatic', () => {
    it('finds nothing to report when today’s code takes every recorded path, and runs no step body', async () => {
      resetDeployed('original');
      const before = await tableSnapshot();
      const report = await replayCheck({ workflows: [guardedWorkflow], databaseUrl: bed.db.url });
      expect(report).toMatchObject({ checked: 3, ok: 3, diverged: [], errors: [], skipped: [] });
      const byTask = Object.fromEntries(report.results.map((result) => [result.taskId, result]));
      expect(byTask[runs.onlyA]).toMatchObject({ result: 'ok', reached: 'new-step', newStep: 'B' });
      expect(byTask[runs.aAndB]).toMatchObject({ result: 'ok', reached: 'new-step', newStep: 'C' });
      expect(byTask[runs.all]).toMatchObject({ result: 'ok', reached: 'end' });
      expect(deployed.ran).toEqual([]);
      expect(await tableSnapshot()).toEqual(before);
    });

    it('reports each run whose recorded path a renamed step diverges from, with both steps', async () => {
      resetDeployed('renamed');
      const report = await replayCheck({ workflows: [guardedWorkflow], databaseUrl: bed.db.url });
      expect(report.checked).toBe(3);
      expect(report.diverged.map((run) => [run.taskId, run.recordedStep, run.requestedStep]).sort()).toEqual(
        [
          [runs.aAndB, 'B', 'B2'],
          [runs.all, 'B', 'B2'],
        ].sort(),
      );
      // A run that recorded only A reaches B2 as a new step with nothing recorded left: fine.
      expect(report.results.find((result) => result.taskId === runs.onlyA)).toMatchObject({ result: 'ok', newStep: 'B2' });
      expect(deployed.ran).toEqual([]);
    });

    it('checks finished runs on request; a removed step diverges where the code asks for a new step, or returns, before it', async () => {
      resetDeployed('without-b');
      const report = await replayCheck({ workflows: [guardedWorkflow], databaseUrl: bed.db.url, query: { includeFinished: true } });
      expect(report.checked).toBe(4);
      expect(report.diverged.map((run) => [run.taskId, run.recordedStep, run.requestedStep]).sort()).toEqual(
        [
          [runs.aAndB, 'B', 'C'], // C was never recorded: asked for while B is left
          [runs.all, 'B', null], // C is recorded: the code returns with B never asked for
          [runs.finished, 'B', 'C'],
        ].sort(),
      );
    });

    it('does not report steps started together (Promise.all) whichever of them was recorded', async () => {
      resetDeployed('together');
      const report = await replayCheck({
        workflows: [guardedWorkflow],
        runs: [
          {
            taskId: 't-1',
            workflowName: 'guarded-trip',
            workflowVersion: null,
            status: 'running',
            input: {},
            retryCount: 0,
            steps: [
              { stepKey: 'A', status: 'completed', output: 'A-done', completionSeq: 1 },
              { stepKey: 'C', status: 'completed', output: 'C-done', completionSeq: 2 },
            ],
          },
        ],
      });
      expect(report).toMatchObject({ checked: 1, ok: 1, diverged: [] });
      expect(report.results[0]).toMatchObject({ result: 'ok', newStep: 'B' });
    });

    it('skips runs of a workflow version today’s code does not have, and refuses a file that is not an export', async () => {
      resetDeployed('original');
      const report = await replayCheck({
        workflows: [guardedWorkflow],
        runs: [{ taskId: 't-2', workflowName: 'guarded-trip', workflowVersion: 4, status: 'running', input: {}, retryCount: 0, steps: [] }],
      });
      expect(report).toMatchObject({ checked: 0, skipped: [{ taskId: 't-2', workflowName: 'guarded-trip', version: 4 }] });
      const notAnExport = path.join(dir, 'not-an-export.json');
      await writeFile(notAnExport, '{"runs": []}');
      await expect(replayCheck({ workflows: [guardedWorkflow], file: notAnExport })).rejects.toBeInstanceOf(ReplayCheckInputError);
    });

    it('replays from an exported file what it replays from the database', async () => {
      resetDeployed('renamed');
      const file = path.join(dir, 'exported.json');
      await writeFile(file, JSON.stringify(await exportRecordedRuns(bed.db.url)));
      const fromFile = await replayCheck({ workflows: [guardedWorkflow], file });
      const fromDatabase = await replayCheck({ workflows: [guardedWorkflow], databaseUrl: bed.db.url });
      expect(fromFile).toEqual(fromDatabase);
      expect(fromFile.diverged).toHaveLength(2);
    });
  });

  describe('npx duraflow replay-check and export-runs', () => {
    it(
      'exits 0 when no run diverges and 1 when one does, naming the run and both steps',
      async () => {
        const clean = await duraflow(['replay-check', '--module', path.join(FIXTURES, 'replay-original.ts'), '--url', bed.db.url]);
        expect(clean).toMatchObject({ code: 0, stderr: '' });
        expect(clean.stdout).toMatch(/^Replayed 3 recorded runs from .*: 3 ok, 0 diverged, 0 could not be checked, 0 skipped\n$/);

        const diverging = await duraflow(['replay-check', '--module', path.join(FIXTURES, 'replay-renamed.ts')], {
          DATABASE_URL: bed.db.url,
        });
        expect(diverging.code).toBe(1);
        expect(diverging.stdout).toContain('3 recorded runs');
        expect(diverging.stdout).toContain(`DIVERGED ${runs.aAndB} (guarded-trip v1): recorded step "B", but the code asked for "B2"`);
        expect(diverging.stdout).toContain(`DIVERGED ${runs.all} (guarded-trip v1)`);
        expect(diverging.stdout).not.toContain(`DIVERGED ${runs.onlyA}`);
      },
      CHILD_TIMEOUT_MS * 2,
    );

    it(
      'exports the runs to a file that replay-check reads without any database (--json)',
      async () => {
        const file = path.join(dir, 'cli-export.json');
        const exported = await duraflow(['export-runs', '--out', file, '--url', bed.db.url]);
        expect(exported).toMatchObject({ code: 0, stderr: '' });
        expect(exported.stdout).toMatch(/^Exported 3 recorded runs from .* to /);
        expect(JSON.parse(await readFile(file, 'utf8')).runs).toHaveLength(3);

        const checked = await duraflow(['replay-check', '--module', path.join(FIXTURES, 'replay-renamed.ts'), '--from', file, '--json']);
        expect(checked.code).toBe(1);
        const report = JSON.parse(checked.stdout);
        expect(report).toMatchObject({ checked: 3, ok: 1 });
        expect(report.diverged.map((run: { taskId: string }) => run.taskId).sort()).toEqual([runs.aAndB, runs.all].sort());
      },
      CHILD_TIMEOUT_MS * 2,
    );

    it(
      'boots the app module without its worker or reaper and replays with its workflows',
      async () => {
        const before = await tableSnapshot();
        const checked = await duraflow(
          ['replay-check', '--module', `${path.join(FIXTURES, 'replay-app.module.ts')}#ReplayAppModule`, '--url', bed.db.url],
          { DATABASE_URL: bed.db.url },
        );
        expect(checked.code).toBe(1);
        expect(checked.stdout).toContain('3 recorded runs');
        expect(checked.stdout).toContain(`DIVERGED ${runs.aAndB}`);
        // Nothing claimed, run, held or reaped: the pending runs are still pending, the running one untouched.
        expect(await tableSnapshot()).toEqual(before);
      },
      CHILD_TIMEOUT_MS * 2,
    );

    it(
      'refuses a command line without --module, or a module with nothing to replay, in one line (exit 2)',
      async () => {
        const noModule = await duraflow(['replay-check', '--url', bed.db.url]);
        expect(noModule).toMatchObject({ code: 2, stdout: '' });
        expect(noModule.stderr).toMatch(/^duraflow: replay-check needs --module/);
        const nothing = await duraflow(['replay-check', '--module', path.join(FIXTURES, 'crashed-runs.ts'), '--url', bed.db.url]);
        expect(nothing).toMatchObject({ code: 2, stdout: '' });
        expect(nothing.stderr).toMatch(/exports no Nest module, no workflow\(name, fn\) definition and no @Workflow class/);
      },
      CHILD_TIMEOUT_MS * 2,
    );
  });
});
