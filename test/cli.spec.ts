import { randomBytes } from 'node:crypto';
import { lstat, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TestingModule } from '@nestjs/testing';
import { ReaperService, workflow, WorkflowService } from '@duraflow/nestjs';
import { RedisLeaderElection } from '@duraflow/nestjs/leader';
import { CLI_TIMEOUT_MS, CliRun, duraflowCli as duraflow } from './support/duraflow-cli';
import { eventually } from './support/waiting';
import { databaseUrl, TestDatabase } from './support/database';
import { useTestBed } from './support/test-bed';
import { SHARED_REDIS_URL } from './support/redis-server';
import { DURAFLOW_MIGRATION_NAMES } from './support/migration-names';

const MIGRATIONS = DURAFLOW_MIGRATION_NAMES;
const CHILD_TIMEOUT_MS = CLI_TIMEOUT_MS;

/** What a tenant named itself to rewrite the operator's terminal: a new window title (OSC), then a cleared screen (CSI). */
const TERMINAL_ATTACK = '\u001b]0;pwned\u0007\u001b[2J\u009b31m\u202eevil\r\nforged line';
/** The same, as the CLI shows it: every control character as a \uXXXX escape. */
const TERMINAL_ATTACK_SHOWN = '\\u001b]0;pwned\\u0007\\u001b[2J\\u009b31m\\u202eevil\\u000d\\u000aforged line';
/** C0 controls but the line feed, DEL, C1 controls, bidirectional overrides and isolates. */
// eslint-disable-next-line no-control-regex -- finding control characters is the point
const CONTROL_CHARACTER = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

/** A failure is one line on stderr, nothing on stdout, and no stack trace. */
function expectOneLineFailure(run: CliRun, code: number, message: RegExp): void {
  expect(run).toMatchObject({ code, stdout: '' });
  expect(run.stderr).toMatch(/^duraflow: [^\n]+\n$/);
  expect(run.stderr).toMatch(message);
  expect(run.stderr).not.toMatch(/\n\s+at /);
}

describe('the duraflow command line', () => {
  const bed = useTestBed({ database: false });
  const database = (migrate: boolean) => bed.createDatabase({ migrate, prefix: 'duraflow_cli' });

  describe('migrate', () => {
    it(
      'applies the migrations to --url, then finds nothing to do through DATABASE_URL',
      async () => {
        const db = await database(false);

        const first = await duraflow(['migrate', '--url', db.url]);
        expect(first).toMatchObject({ code: 0, stderr: '' });
        expect(first.stdout).toBe(`Applied to ${new URL(db.url).host}/${db.name}: ${MIGRATIONS.join(', ')}\n`);
        const { rows } = await db.client.query('SELECT name FROM migrations ORDER BY timestamp');
        expect(rows.map((row) => row.name)).toEqual(MIGRATIONS);

        const second = await duraflow(['migrate'], { DATABASE_URL: db.url });
        expect(second).toMatchObject({ code: 0, stderr: '' });
        expect(second.stdout).toMatch(/^Schema is up to date on /);
      },
      CHILD_TIMEOUT_MS,
    );
  });

  describe('status', () => {
    let db: TestDatabase;

    beforeAll(async () => {
      db = await database(true);
      // Two workflows in every state that matters, one task long overdue, one for later, one dead letter.
      await db.client.query(`
        INSERT INTO agent_tasks (id, workflow_name, status, created_at, scheduled_at) VALUES
          ('00000000-0000-4000-8000-000000000001', 'alpha', 'completed', now() - interval '1 hour', NULL),
          ('00000000-0000-4000-8000-000000000002', 'alpha', 'completed', now() - interval '1 hour', NULL),
          ('00000000-0000-4000-8000-000000000003', 'alpha', 'partial_rollback', now() - interval '1 hour', NULL),
          ('00000000-0000-4000-8000-000000000004', 'alpha', 'pending', now() - interval '95 seconds', NULL),
          ('00000000-0000-4000-8000-000000000005', 'beta', 'running', now() - interval '10 minutes', NULL),
          ('00000000-0000-4000-8000-000000000006', 'beta', 'pending', now() - interval '10 minutes', now() - interval '20 seconds'),
          ('00000000-0000-4000-8000-000000000007', 'beta', 'pending', now(), now() + interval '1 day')`);
      const { rows } = await db.client.query(
        `INSERT INTO step_runs (task_id, step_key, status) VALUES ('00000000-0000-4000-8000-000000000003', 'charge', 'completed') RETURNING id`,
      );
      await db.client.query(
        `INSERT INTO dead_letter_queue (task_id, step_id, error) VALUES ('00000000-0000-4000-8000-000000000003', $1, '{}')`,
        [rows[0].id],
      );
    });

    it(
      'reports tasks by workflow and status, the oldest runnable pending task, later ones and dead letters (--json)',
      async () => {
        const run = await duraflow(['status', '--json'], { DATABASE_URL: db.url });
        expect(run).toMatchObject({ code: 0, stderr: '' });
        const report = JSON.parse(run.stdout);

        expect(report.tasks).toEqual([
          { workflowName: 'alpha', counts: { completed: 2, partial_rollback: 1, pending: 1 } },
          { workflowName: 'beta', counts: { pending: 2, running: 1 } },
        ]);
        expect(report.oldestPending).toMatchObject({ id: '00000000-0000-4000-8000-000000000004', workflowName: 'alpha' });
        expect(report.oldestPending.waitingMs).toBeGreaterThanOrEqual(95_000);
        expect(report.scheduledLater).toBe(1);
        expect(report.deadLetters).toMatchObject({ total: 1, byWorkflow: [{ workflowName: 'alpha', count: 1 }] });
        expect(report.leader).toEqual({ via: 'postgres', key: 'duraflow:reaper:leader', lease: null });
      },
      CHILD_TIMEOUT_MS,
    );

    it(
      'lists the schedules with their next tick and the task of their last tick',
      async () => {
        await db.client.query(
          `INSERT INTO duraflow_schedules (name, workflow_name, cron, timezone, last_tick_at) VALUES
             ('alpha-hourly', 'alpha', '0 * * * *', 'Europe/Amsterdam', '2026-01-01T10:00:00Z'),
             ('beta-yearly', 'beta', '0 0 1 1 *', 'UTC', NULL)`,
        );
        await db.client.query(
          `INSERT INTO duraflow_schedule_ticks (schedule_name, tick_at, task_id)
           VALUES ('alpha-hourly', '2026-01-01T10:00:00Z', '00000000-0000-4000-8000-000000000001')`,
        );
        try {
          const report = JSON.parse((await duraflow(['status', '--json', '--url', db.url])).stdout);
          expect(report.schedules).toEqual([
            {
              name: 'alpha-hourly',
              workflow: 'alpha',
              cron: '0 * * * *',
              timezone: 'Europe/Amsterdam',
              nextTickAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:00:00\.000Z$/),
              lastTickAt: '2026-01-01T10:00:00.000Z',
              lastTask: { id: '00000000-0000-4000-8000-000000000001', status: 'completed', tickAt: '2026-01-01T10:00:00.000Z' },
            },
            {
              name: 'beta-yearly',
              workflow: 'beta',
              cron: '0 0 1 1 *',
              timezone: 'UTC',
              nextTickAt: `${new Date().getUTCFullYear() + 1}-01-01T00:00:00.000Z`,
              lastTickAt: null,
              lastTask: null,
            },
          ]);
          const text = (await duraflow(['status', '--url', db.url])).stdout;
          expect(text).toMatch(/schedule\s+workflow\s+cron\s+timezone\s+next tick\s+last tick\s+last task\n/);
          expect(text).toMatch(
            /alpha-hourly\s+alpha\s+0 \* \* \* \*\s+Europe\/Amsterdam\s+\S+\s+2026-01-01T10:00:00.000Z\s+00000000-0000-4000-8000-000000000001 \(completed, tick 2026-01-01T10:00:00.000Z\)\n/,
          );
          expect(text).toMatch(/beta-yearly\s+beta\s+0 0 1 1 \*\s+UTC\s+\S+\s+-\s+-\n/);
        } finally {
          await db.client.query(`DELETE FROM duraflow_schedule_ticks; DELETE FROM duraflow_schedules`);
        }
      },
      CHILD_TIMEOUT_MS,
    );

    it(
      'prints the same as a table for a person',
      async () => {
        const run = await duraflow(['status', '--url', db.url]);
        expect(run).toMatchObject({ code: 0, stderr: '' });
        expect(run.stdout).toMatch(/workflow\s+pending\s+running\s+completed\s+failed\s+cancelled\s+rolled_back\s+partial_rollback\n/);
        expect(run.stdout).toMatch(/alpha\s+1\s+0\s+2\s+0\s+0\s+0\s+1\n/);
        expect(run.stdout).toMatch(/beta\s+2\s+1\s+0\s+0\s+0\s+0\s+0\n/);
        expect(run.stdout).toMatch(/\(all\)\s+3\s+1\s+2\s+0\s+0\s+0\s+1\n/);
        expect(run.stdout).toMatch(/Oldest runnable pending task: waiting 1m \d+s \(00000000-0000-4000-8000-000000000004, alpha\)/);
        expect(run.stdout).toContain('Pending tasks scheduled for later: 1');
        expect(run.stdout).toMatch(/Dead letters: 1 \(alpha: 1\), oldest \d{4}-/);
        expect(run.stdout).toContain('Reaper leader: none (no node has held the PostgreSQL leader lease "duraflow:reaper:leader")');
      },
      CHILD_TIMEOUT_MS,
    );

    it(
      'shows the unfinished tasks per workflow version, held ones apart, and the patches unfinished tasks recorded as false',
      async () => {
        const versions = await database(true);
        await versions.client.query(`
          INSERT INTO agent_tasks (id, workflow_name, status, workflow_version, held_at) VALUES
            ('00000000-0000-4000-8000-000000000011', 'booking', 'running', NULL, NULL),
            ('00000000-0000-4000-8000-000000000012', 'booking', 'pending', 1, NULL),
            ('00000000-0000-4000-8000-000000000013', 'booking', 'pending', 1, now()),
            ('00000000-0000-4000-8000-000000000014', 'booking', 'pending', 2, NULL),
            ('00000000-0000-4000-8000-000000000015', 'booking', 'completed', 2, NULL)`);
        await versions.client.query(`
          INSERT INTO step_runs (task_id, step_key, status, output) VALUES
            ('00000000-0000-4000-8000-000000000011', 'patch:send-sms', 'completed', 'false'),
            ('00000000-0000-4000-8000-000000000014', 'patch:send-sms', 'completed', 'true'),
            ('00000000-0000-4000-8000-000000000015', 'patch:send-sms', 'completed', 'false')`);

        const json = await duraflow(['status', '--json', '--url', versions.url]);
        expect(json).toMatchObject({ code: 0, stderr: '' });
        const report = JSON.parse(json.stdout);
        expect(report.unfinishedByVersion).toEqual([
          { workflowName: 'booking', version: 1, pending: 1, running: 1, held: 1 },
          { workflowName: 'booking', version: 2, pending: 1, running: 0, held: 0 },
        ]);
        expect(report.patchesRecordedFalse).toEqual([{ workflowName: 'booking', patchId: 'send-sms', unfinishedTasks: 1 }]);

        const table = await duraflow(['status', '--url', versions.url]);
        expect(table.stdout).toContain('booking v1: 1 pending, 1 running, 1 held (determinism guard)');
        expect(table.stdout).toContain('booking v2: 1 pending, 0 running\n');
        expect(table.stdout).toContain('Patches unfinished tasks recorded as false (keep their old branch): booking "send-sms": 1');
      },
      CHILD_TIMEOUT_MS,
    );

    describe('with an app running on the database', () => {
      let app: TestingModule;
      const workerId = `cli-status-${randomBytes(3).toString('hex')}`;

      beforeAll(async () => {
        app = await bed.start({
          databaseUrl: db.url,
          duraflow: { workerId, workflows: [workflow('gamma', async () => null)], worker: { enabled: false }, reaper: { intervalMs: 200 } },
        });
        await eventually('the app leads the reaper', () => app.get(ReaperService).isLeader());
      });

      afterAll(() => bed.close(app));

      it(
        'names the worker that holds the PostgreSQL leader lease, with its term',
        async () => {
          const run = await duraflow(['status', '--url', db.url]);
          expect(run.stdout).toMatch(
            new RegExp(`Reaper leader: ${workerId} \\(PostgreSQL leader lease "duraflow:reaper:leader", term 1, expires in \\d+`),
          );
          const json = JSON.parse((await duraflow(['status', '--url', db.url, '--json'])).stdout);
          expect(json.leader.lease).toMatchObject({ holder: workerId, term: '1' });
          expect(json.leader.lease.expiresInMs).toBeGreaterThan(0);
        },
        CHILD_TIMEOUT_MS,
      );

      it(
        'looks for the leader key the app was given (--leader-key)',
        async () => {
          const json = JSON.parse((await duraflow(['status', '--url', db.url, '--json', '--leader-key', 'another:key'])).stdout);
          expect(json.leader).toEqual({ via: 'postgres', key: 'another:key', lease: null });
        },
        CHILD_TIMEOUT_MS,
      );
    });

    it(
      'reads the leader from Redis with --redis or REDIS_URL',
      async () => {
        const key = `duraflow:test:cli:${randomBytes(4).toString('hex')}`;
        const election = new RedisLeaderElection({ redis: { url: SHARED_REDIS_URL }, key, workerId: 'redis-led-worker', ttlMs: 30_000 });
        try {
          expect(await election.tick()).toBe(true);

          const viaOption = await duraflow(['status', '--url', db.url, '--redis', SHARED_REDIS_URL, '--leader-key', key]);
          expect(viaOption.stdout).toMatch(
            new RegExp(`Reaper leader: redis-led-worker \\(Redis key ${key}, expires in \\d+\\.\\d s unless renewed\\)`),
          );
          const viaEnv = JSON.parse(
            (await duraflow(['status', '--json', '--leader-key', key], { DATABASE_URL: db.url, REDIS_URL: SHARED_REDIS_URL })).stdout,
          );
          expect(viaEnv.leader).toMatchObject({ via: 'redis', key, workerId: 'redis-led-worker' });
          expect(viaEnv.leader.expiresInMs).toBeGreaterThan(0);
        } finally {
          await election.close();
        }
        const none = await duraflow(['status', '--url', db.url, '--redis', SHARED_REDIS_URL, '--leader-key', key]);
        expect(none.stdout).toContain(`Reaper leader: none (Redis key ${key} is not set)`);
      },
      CHILD_TIMEOUT_MS,
    );

    it(
      'says to migrate first on a database without the Duraflow tables',
      async () => {
        const empty = await database(false);
        expectOneLineFailure(await duraflow(['status', '--url', empty.url]), 1, /has no Duraflow tables: run `duraflow migrate` first\./);
      },
      CHILD_TIMEOUT_MS,
    );
  });

  describe('what it prints from the data: control characters escaped', () => {
    it(
      'status shows a concurrency key that would rewrite the terminal as escapes, and --json keeps it exact',
      async () => {
        const db = await database(true);
        const tenantExport = workflow(
          'tenant-export',
          async (ctx) =>
            ctx.step.run(
              'export',
              ({ signal }) => new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
            ),
          { concurrencyKey: (input: { tenant: string }) => input.tenant, keyConcurrency: 1 },
        );
        const app = await bed.start({ databaseUrl: db.url, duraflow: { workflows: [tenantExport] } });
        const workflows = app.get(WorkflowService);
        const [first] = [
          await workflows.submit('tenant-export', { tenant: TERMINAL_ATTACK }),
          await workflows.submit('tenant-export', { tenant: TERMINAL_ATTACK }),
        ];
        await eventually('one export runs, the other waits on its key', async () => (await workflows.get(first.id))?.status === 'running');

        const text = await duraflow(['status', '--url', db.url]);
        expect(text).toMatchObject({ code: 0, stderr: '' });
        expect(text.stdout).not.toMatch(CONTROL_CHARACTER);
        expect(text.stdout).toMatch(new RegExp(`tenant-export\\s+${escapeRegExp(TERMINAL_ATTACK_SHOWN)}\\s+keyConcurrency\\s+1/1\\s+1\\n`));
        expect(text.stdout.split('\n').filter((line) => line.includes('forged line'))).toHaveLength(1);

        const json = await duraflow(['status', '--url', db.url, '--json']);
        expect(json.stdout).not.toMatch(CONTROL_CHARACTER);
        expect(JSON.parse(json.stdout).limits).toContainEqual(expect.objectContaining({ key: TERMINAL_ATTACK, kind: 'keyConcurrency' }));
        await bed.close(app);
      },
      CHILD_TIMEOUT_MS * 2,
    );

    it(
      'replay-check shows the step keys, workflow names and ids of a runs file as escapes, in its text and its JSON',
      async () => {
        const dir = await mkdtemp(path.join(tmpdir(), 'duraflow-cli-'));
        try {
          const file = path.join(dir, 'runs.json');
          const step = (stepKey: string, completionSeq: number) => ({
            stepKey,
            status: 'completed',
            output: `${stepKey}-done`,
            completionSeq,
          });
          const run = (taskId: string, workflowName: string, steps: unknown[]) => ({
            taskId,
            workflowName,
            workflowVersion: 1,
            status: 'pending',
            input: {},
            retryCount: 1,
            steps,
          });
          await writeFile(
            file,
            JSON.stringify({
              format: 'duraflow-recorded-runs',
              formatVersion: 1,
              exportedAt: new Date().toISOString(),
              runs: [
                run(`t-1${TERMINAL_ATTACK}`, 'guarded-trip', [step('A', 1), step(`B${TERMINAL_ATTACK}`, 2)]),
                run('t-2', `guarded-trip${TERMINAL_ATTACK}`, []),
              ],
            }),
          );
          const module = path.join(__dirname, 'fixtures', 'deploys', 'replay-original.ts');
          const text = await duraflow(['replay-check', '--module', module, '--from', file]);
          expect(text.code).toBe(1);
          expect(text.stdout).not.toMatch(CONTROL_CHARACTER);
          expect(text.stdout).toContain(
            `DIVERGED t-1${TERMINAL_ATTACK_SHOWN} (guarded-trip v1): recorded step "B${TERMINAL_ATTACK_SHOWN}", but the code asked for "B"`,
          );
          expect(text.stdout).toContain(`SKIPPED t-2 (guarded-trip${TERMINAL_ATTACK_SHOWN} v1): this code has no such workflow version`);

          const json = await duraflow(['replay-check', '--module', module, '--from', file, '--json']);
          expect(json.stdout).not.toMatch(CONTROL_CHARACTER);
          expect(JSON.parse(json.stdout).diverged).toEqual([expect.objectContaining({ recordedStep: `B${TERMINAL_ATTACK}` })]);
        } finally {
          await rm(dir, { recursive: true, force: true });
        }
      },
      CHILD_TIMEOUT_MS * 2,
    );
  });

  describe('export-runs: a private file, never through a link', () => {
    let db: TestDatabase;
    let dir: string;

    beforeAll(async () => {
      db = await database(true);
    });

    beforeEach(async () => {
      dir = await mkdtemp(path.join(tmpdir(), 'duraflow-export-'));
    });

    afterEach(() => rm(dir, { recursive: true, force: true }));

    it(
      'writes a new file readable by its owner only (0600)',
      async () => {
        const out = path.join(dir, 'runs.json');
        const run = await duraflow(['export-runs', '--url', db.url, '--out', out]);
        expect(run).toMatchObject({ code: 0, stderr: '' });
        expect((await stat(out)).mode & 0o777).toBe(0o600);
        expect(JSON.parse(await readFile(out, 'utf8'))).toMatchObject({ format: 'duraflow-recorded-runs', runs: [] });
      },
      CHILD_TIMEOUT_MS,
    );

    it(
      'refuses a symbolic link planted at --out, with or without --force, and leaves its target as it was',
      async () => {
        const target = path.join(dir, 'authorized_keys');
        await writeFile(target, 'ssh-ed25519 AAAA operator\n', { mode: 0o644 });
        const out = path.join(dir, 'runs.json');
        await symlink(target, out);
        for (const force of [[], ['--force']]) {
          expectOneLineFailure(
            await duraflow(['export-runs', '--url', db.url, '--out', out, ...force]),
            1,
            /runs\.json is a symbolic link: the export is never written through a link/,
          );
          expect(await readFile(target, 'utf8')).toBe('ssh-ed25519 AAAA operator\n');
          expect((await stat(target)).mode & 0o777).toBe(0o644);
          expect((await lstat(out)).isSymbolicLink()).toBe(true);
        }
        // A dangling link is refused too: it would create the file it points to.
        const dangling = path.join(dir, 'dangling.json');
        await symlink(path.join(dir, 'created-through-link'), dangling);
        expectOneLineFailure(await duraflow(['export-runs', '--url', db.url, '--out', dangling]), 1, /is a symbolic link/);
        await expect(stat(path.join(dir, 'created-through-link'))).rejects.toMatchObject({ code: 'ENOENT' });
      },
      CHILD_TIMEOUT_MS * 2,
    );

    it(
      'refuses a file that exists unless --force, which replaces it with a new 0600 file',
      async () => {
        const out = path.join(dir, 'runs.json');
        await writeFile(out, 'an older export', { mode: 0o644 });
        expectOneLineFailure(
          await duraflow(['export-runs', '--url', db.url, '--out', out]),
          1,
          /runs\.json exists: pass --force to replace it/,
        );
        expect(await readFile(out, 'utf8')).toBe('an older export');

        const forced = await duraflow(['export-runs', '--url', db.url, '--out', out, '--force']);
        expect(forced).toMatchObject({ code: 0, stderr: '' });
        expect(JSON.parse(await readFile(out, 'utf8'))).toMatchObject({ format: 'duraflow-recorded-runs' });
        expect((await stat(out)).mode & 0o777).toBe(0o600);
      },
      CHILD_TIMEOUT_MS * 2,
    );
  });

  describe('failures: one line, a non-zero exit, no stack trace', () => {
    const unreachable = 'postgres://postgres@127.0.0.1:1/duraflow_nowhere';
    /** Stands for the URL of a migrated database in the table below. */
    const MIGRATED = '<migrated>';
    let migrated: TestDatabase;

    beforeAll(async () => {
      migrated = await database(true);
    });

    it.each<[string, string[], Record<string, string>, number, RegExp]>([
      ['no database at all', ['status'], {}, 2, /No database given: set DATABASE_URL or pass --url/],
      ['a URL that is not one', ['migrate', '--url', 'not a url'], {}, 2, /Invalid database URL "not a url": expected postgres:\/\//],
      [
        'another scheme, without echoing the password',
        ['status'],
        { DATABASE_URL: 'mysql://root:s3cret@db/app' },
        2,
        /Invalid database URL "mysql:\/\/root:\*\*\*@db\/app": the scheme must be postgres:\/\//,
      ],
      [
        'an unreachable server (migrate)',
        ['migrate', '--url', unreachable],
        {},
        1,
        /Cannot connect to PostgreSQL at 127\.0\.0\.1:1\/duraflow_nowhere: connect ECONNREFUSED/,
      ],
      [
        'an unreachable server (status)',
        ['status'],
        { DATABASE_URL: unreachable },
        1,
        /Cannot connect to PostgreSQL at 127\.0\.0\.1:1\/duraflow_nowhere: connect ECONNREFUSED/,
      ],
      [
        'a database that does not exist',
        ['migrate', '--url', databaseUrl('duraflow_cli_missing')],
        {},
        1,
        /database "duraflow_cli_missing" does not exist; create it, or fix the URL\./,
      ],
      [
        'an unreachable Redis',
        ['status', '--url', MIGRATED, '--redis', 'redis://127.0.0.1:1'],
        {},
        1,
        /Cannot read the reaper leader from Redis at 127\.0\.0\.1:1: .*ECONNREFUSED/,
      ],
      ['an unknown command', ['migrat'], {}, 2, /Unknown command "migrat": use migrate, status, replay-check, export-runs/],
      ['an unknown option', ['status', '--verbose'], {}, 2, /Unknown option --verbose/],
      ['an option without its value', ['status', '--url'], {}, 2, /--url needs a value/],
    ])(
      'refuses %s',
      async (_, args, env, code, message) => {
        const run = await duraflow(
          args.map((arg) => (arg === MIGRATED ? migrated.url : arg)),
          env,
        );
        expectOneLineFailure(run, code, message);
      },
      CHILD_TIMEOUT_MS,
    );

    it(
      'prints its usage with --help and without a command',
      async () => {
        for (const args of [['--help'], []]) {
          const run = await duraflow(args);
          expect(run).toMatchObject({ code: 0, stderr: '' });
          expect(run.stdout).toMatch(/^Usage: duraflow <command> \[options\]/);
          expect(run.stdout).toContain('migrate');
          expect(run.stdout).toContain('status');
        }
      },
      CHILD_TIMEOUT_MS,
    );
  });
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
