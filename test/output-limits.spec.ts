import { randomUUID } from 'node:crypto';
import { InvalidDuraflowOptionsError, SagaService, TaskStatus, workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { resolveDuraflowOptions } from '@duraflow/nestjs/config/resolved-options';
import { useTestBed } from './support/test-bed';

/*
 * Outputs and list pages have a size (issue 21, point 2): a step's or a run's output over
 * maxOutputBytes fails it with OutputTooLargeError and is never stored; a list page holds at
 * most maxListPageBytes of rows, cut in the database.
 */

const MAX_OUTPUT_BYTES = 4_096;
const WAIT = { timeoutMs: 15_000 };

/** `{"blob":"xx…"}`, exactly `bytes` bytes of JSON. */
function valueOfBytes(bytes: number): { blob: string } {
  const value = { blob: 'x'.repeat(bytes - '{"blob":""}'.length) };
  expect(Buffer.byteLength(JSON.stringify(value))).toBe(bytes);
  return value;
}

/** `[[[…]]]`, `depth` arrays deep. */
function nestedArrays(depth: number): unknown {
  return JSON.parse('['.repeat(depth) + ']'.repeat(depth));
}

const exportRuns: number[] = [];
const undone: unknown[] = [];

/** `reserve` (undone on rollback), then `export`, which returns `input.bytes` bytes of JSON. */
const exporter = workflow(
  'exporter',
  async (ctx: WorkflowContext<{ bytes: number }>) => {
    await ctx.step.run('reserve', () => ({ reservation: 'R-1' }));
    const report = await ctx.step.run(
      'export',
      () => {
        exportRuns.push(ctx.input.bytes);
        return valueOfBytes(ctx.input.bytes);
      },
      { retries: 2, backoff: { initialDelayMs: 1 } },
    );
    return { exported: report.blob.length };
  },
  { compensations: { reserve: async (reservation) => void undone.push(reservation) } },
);

/** Returns `input.bytes` bytes of JSON as the run's own output, with no step. */
const bulky = workflow('bulky', async (ctx: WorkflowContext<{ bytes: number }>) => valueOfBytes(ctx.input.bytes));

/** One step that returns arrays nested `input.depth` deep. */
const deep = workflow('deep', async (ctx: WorkflowContext<{ depth: number }>) => {
  await ctx.step.run('tree', () => nestedArrays(ctx.input.depth));
  return 'unreachable';
});

describe('output and list page limits', () => {
  const bed = useTestBed({ databasePerTest: true });

  beforeEach(() => {
    exportRuns.length = 0;
    undone.length = 0;
  });

  /** Every output stored (steps and tasks) as compact JSON bytes, largest first. */
  async function storedOutputSizes(): Promise<number[]> {
    const { rows } = await bed.db.client.query(
      `SELECT output FROM step_runs WHERE output IS NOT NULL UNION ALL SELECT output FROM agent_tasks WHERE output IS NOT NULL`,
    );
    return rows.map((row) => Buffer.byteLength(JSON.stringify(row.output))).sort((a, b) => b - a);
  }

  describe('maxOutputBytes', () => {
    it('fails a step whose output is one byte over with OutputTooLargeError, stores none of it, and rolls back the steps before it', async () => {
      const app = await bed.start({ duraflow: { maxOutputBytes: MAX_OUTPUT_BYTES, workflows: [exporter] } });
      const workflows = app.get(WorkflowService);

      const task = await workflows.submit('exporter', { bytes: MAX_OUTPUT_BYTES + 1 });
      const done = await workflows.waitFor(task.id, WAIT);

      expect(done.status).toBe(TaskStatus.ROLLED_BACK);
      expect(done.error).toMatchObject({
        code: 'OUTPUT_TOO_LARGE',
        name: 'OutputTooLargeError',
        stepKey: 'export',
        message: expect.stringContaining(`is ${MAX_OUTPUT_BYTES + 1} bytes as JSON, over the limit of ${MAX_OUTPUT_BYTES} bytes`),
      });
      expect(done.output).toBeNull();
      // Like an output JSON cannot hold: not retried (the same code returns the same output).
      expect(exportRuns).toEqual([MAX_OUTPUT_BYTES + 1]);
      expect(undone).toEqual([{ reservation: 'R-1' }]);
      const steps = await workflows.getSteps(task.id);
      expect(steps.map((step) => [step.stepKey, step.status])).toEqual([['reserve', 'completed']]);
      expect((await storedOutputSizes())[0]).toBeLessThanOrEqual(MAX_OUTPUT_BYTES);
    });

    it('stores a step output of exactly maxOutputBytes', async () => {
      const app = await bed.start({ duraflow: { maxOutputBytes: MAX_OUTPUT_BYTES, workflows: [exporter] } });
      const workflows = app.get(WorkflowService);

      const task = await workflows.submit('exporter', { bytes: MAX_OUTPUT_BYTES });
      const done = await workflows.waitFor(task.id, WAIT);

      expect(done.status).toBe(TaskStatus.COMPLETED);
      const steps = await workflows.getSteps(task.id);
      expect(steps[1]).toMatchObject({ stepKey: 'export', status: 'completed', output: valueOfBytes(MAX_OUTPUT_BYTES) });
      expect(await storedOutputSizes()).toEqual([MAX_OUTPUT_BYTES, expect.any(Number), expect.any(Number)]);
    });

    it('fails a run whose own output is over it with OUTPUT_TOO_LARGE, and stores no output', async () => {
      const app = await bed.start({ duraflow: { maxOutputBytes: MAX_OUTPUT_BYTES, workflows: [bulky] } });
      const workflows = app.get(WorkflowService);

      const over = await workflows.waitFor((await workflows.submit('bulky', { bytes: MAX_OUTPUT_BYTES + 1 })).id, WAIT);
      const exact = await workflows.waitFor((await workflows.submit('bulky', { bytes: MAX_OUTPUT_BYTES })).id, WAIT);

      expect(over.status).toBe(TaskStatus.FAILED);
      expect(over.error).toMatchObject({
        code: 'OUTPUT_TOO_LARGE',
        name: 'OutputTooLargeError',
        message: expect.stringContaining('workflow "bulky"'),
      });
      expect(over.output).toBeNull();
      expect(exact).toMatchObject({ status: TaskStatus.COMPLETED, output: valueOfBytes(MAX_OUTPUT_BYTES) });
      expect(await storedOutputSizes()).toEqual([MAX_OUTPUT_BYTES]);
    });

    it('defaults to 1 MiB, beside maxInputBytes, and refuses a bad value at boot', () => {
      expect(resolveDuraflowOptions()).toMatchObject({
        maxInputBytes: 1_048_576,
        maxOutputBytes: 1_048_576,
        maxListPageBytes: 2_097_152,
        maxJsonDepth: 100,
      });
      for (const options of [{ maxOutputBytes: 0 }, { maxListPageBytes: 1.5 }, { maxJsonDepth: 0 }, { maxJsonDepth: 1001 }]) {
        expect(() => resolveDuraflowOptions(options)).toThrow(InvalidDuraflowOptionsError);
      }
    });
  });

  describe('errors', () => {
    it('keeps the first 8,192 characters of a huge error message and stack, in the step, the task and the dead letter', async () => {
      const huge = `card declined: ${'x'.repeat(1_000_000)}`;
      const noisy = workflow(
        'noisy',
        async (ctx) => {
          await ctx.step.run('hold', () => ({ held: true }));
          await ctx.step.run('charge', () => {
            throw new Error(huge);
          });
        },
        { compensations: { hold: async () => Promise.reject(new Error(huge)) }, compensation: { retries: 0 } },
      );
      const app = await bed.start({ duraflow: { workflows: [noisy] } });
      const workflows = app.get(WorkflowService);

      const done = await workflows.waitFor((await workflows.submit('noisy', {})).id, WAIT);

      expect(done.status).toBe(TaskStatus.PARTIAL_ROLLBACK);
      const stepError = (await workflows.getSteps(done.id))[1].error as { message: string; stack: string };
      const [deadLetter] = (await app.get(SagaService).listDeadLetters()).items;
      for (const error of [done.error!, stepError, deadLetter.error as { message: string; stack?: string }]) {
        expect(error.message).toBe(`${huge.slice(0, 8_192)}… (${huge.length - 8_192} more characters cut)`);
        expect(error.stack!.length).toBeLessThan(8_300);
        expect(error.stack).toMatch(/^Error: card declined: x+… \(\d+ more characters cut\)$/);
      }
    });
  });

  describe('maxJsonDepth on outputs', () => {
    it('fails a step whose output nests 5,000 arrays deep with NotSerializableError, not a stack overflow', async () => {
      const app = await bed.start({ duraflow: { workflows: [deep] } });
      const workflows = app.get(WorkflowService);

      const tooDeep = await workflows.waitFor((await workflows.submit('deep', { depth: 5_000 })).id, WAIT);

      expect(tooDeep.status).toBe(TaskStatus.FAILED);
      expect(tooDeep.error).toMatchObject({
        code: 'NOT_SERIALIZABLE',
        stepKey: 'tree',
        message: expect.stringContaining('nested deeper than 100 levels (maxJsonDepth)'),
      });
      expect(await workflows.getSteps(tooDeep.id)).toEqual([]);
    });

    it('stores a step output exactly maxJsonDepth deep', async () => {
      const app = await bed.start({ duraflow: { maxJsonDepth: 20, workflows: [deep] } });
      const workflows = app.get(WorkflowService);

      const atLimit = await workflows.waitFor((await workflows.submit('deep', { depth: 20 })).id, WAIT);
      const over = await workflows.waitFor((await workflows.submit('deep', { depth: 21 })).id, WAIT);

      expect(atLimit.status).toBe(TaskStatus.COMPLETED);
      expect((await workflows.getSteps(atLimit.id))[0].output).toEqual(nestedArrays(20));
      expect(over.error).toMatchObject({ code: 'NOT_SERIALIZABLE', message: expect.stringContaining('deeper than 20 levels') });
    });
  });

  describe('maxListPageBytes', () => {
    const PAGE_BYTES = 64 * 1024;

    /** Follows nextCursor from the first page to the last; every page as it came. */
    async function allPages<T extends { id: string }>(list: (cursor?: string) => Promise<{ items: T[]; nextCursor: string | null }>) {
      const pages: T[][] = [];
      let cursor: string | undefined;
      do {
        const page = await list(cursor);
        pages.push(page.items);
        cursor = page.nextCursor ?? undefined;
      } while (cursor && pages.length < 100);
      return pages;
    }

    /**
     * The newest item (over the budget) alone on the first page, every later page within the
     * budget (counting each item's `payload`) and holding several items, and every item listed
     * once, newest first.
     */
    function expectBoundedPages<T extends { id: string }>(pages: T[][], ids: string[], payload: (item: T) => unknown): void {
      expect(pages[0].map((item) => item.id)).toEqual([ids[0]]);
      for (const page of pages.slice(1)) {
        expect(page.reduce((bytes, item) => bytes + JSON.stringify(payload(item)).length, 0)).toBeLessThanOrEqual(PAGE_BYTES);
      }
      expect(pages[1].length).toBeGreaterThan(1);
      expect(pages.length).toBeGreaterThan(4);
      expect(pages.flat().map((item) => item.id)).toEqual(ids);
    }

    it('cuts task pages to maxListPageBytes in the database, gives an oversized task a page of its own, and loses none', async () => {
      const app = await bed.start({ duraflow: { worker: { enabled: false }, maxListPageBytes: PAGE_BYTES, workflows: [exporter] } });
      const workflows = app.get(WorkflowService);
      const ids: string[] = [];
      for (let i = 0; i < 30; i++) ids.unshift(await bed.rows.insertTask('exporter', valueOfBytes(10_000)));
      ids.unshift(await bed.rows.insertTask('exporter', valueOfBytes(200_000))); // the newest, alone over the budget

      const pages = await allPages((cursor) => workflows.list({ limit: 1000, cursor }));

      expectBoundedPages(pages, ids, (task) => task.input);
    });

    it('cuts dead-letter pages the same way', async () => {
      const app = await bed.start({ duraflow: { worker: { enabled: false }, maxListPageBytes: PAGE_BYTES } });
      const saga = app.get(SagaService);
      const ids: string[] = [];
      for (const bytes of [...Array(30).fill(10_000), 200_000]) {
        const { rows } = await bed.db.client.query(
          `INSERT INTO dead_letter_queue (task_id, step_id, error) VALUES ($1, $2, $3) RETURNING id`,
          [randomUUID(), randomUUID(), { message: 'x'.repeat(bytes) }],
        );
        ids.unshift(rows[0].id);
      }

      const pages = await allPages((cursor) => saga.listDeadLetters({ limit: 1000, cursor }));

      expectBoundedPages(pages, ids, (entry) => entry.error);
    });

    it('still fills a page up to limit with small tasks', async () => {
      const app = await bed.start({ duraflow: { worker: { enabled: false }, maxListPageBytes: PAGE_BYTES, workflows: [exporter] } });
      const workflows = app.get(WorkflowService);
      for (let i = 0; i < 12; i++) await bed.rows.insertTask('exporter', { i });

      const first = await workflows.list({ limit: 10 });
      const rest = await workflows.list({ limit: 10, cursor: first.nextCursor! });

      expect([first.items.length, rest.items.length, rest.nextCursor]).toEqual([10, 2, null]);
    });
  });
});
