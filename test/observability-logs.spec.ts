import { ConsoleLogger, Logger } from '@nestjs/common';
import { TaskStatus, WorkflowService } from '@duraflow/nestjs';
import { checkoutWorkflow } from './fixtures/observability/workflows';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/*
 * Structured logs: the library logs through Nest's logger, and each line about a task carries the
 * task's id and workflow as fields, which a JSON logger prints (Nest's ConsoleLogger with
 * `json: true` here), while the default text logger prints the same human sentence as before.
 */

/** What Nest's ConsoleLogger writes to stdout and stderr meanwhile. */
function captureConsole(): { lines: string[]; restore(): void } {
  const lines: string[] = [];
  const spies = [process.stdout, process.stderr].map((stream) =>
    jest.spyOn(stream, 'write').mockImplementation((chunk: string | Uint8Array) => {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      return true;
    }),
  );
  return { lines, restore: () => spies.forEach((spy) => spy.mockRestore()) };
}

describe('structured logs', () => {
  const bed = useTestBed();
  let console: ReturnType<typeof captureConsole> | undefined;

  afterEach(() => {
    console?.restore();
    console = undefined;
    Logger.overrideLogger(new ConsoleLogger({ logLevels: ['error', 'warn'] }));
  });

  /** Runs a checkout to partial_rollback with `logger` as the app's logger (after boot: Nest's testing module sets its own). */
  async function rollBackOne(logger: ConsoleLogger): Promise<string> {
    const app = await bed.start({ duraflow: { workflows: [checkoutWorkflow()] } });
    app.useLogger(logger);
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('checkout', { decline: true, seatUndoFails: true });
    expect((await workflows.waitFor(task.id)).status).toBe(TaskStatus.PARTIAL_ROLLBACK);
    return task.id;
  }

  it('gives a JSON logger the task id and workflow of every line about a task', async () => {
    console = captureConsole();
    const taskId = await rollBackOne(new ConsoleLogger({ json: true }));

    const records = await eventually('the rollback’s end is logged', () => {
      const duraflow = console!.lines
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line))
        .filter((line) => line.context === 'Duraflow' && typeof line.message === 'object' && line.message.taskId === taskId);
      return duraflow.some((line) => line.message.message.includes('ended partial_rollback')) ? duraflow : undefined;
    });
    expect(records!.map((record) => ({ level: record.level, ...record.message }))).toEqual([
      {
        level: 'warn',
        message: expect.stringMatching(
          /^Compensation of step "hold-seat" of task .+ failed for good: seat service unreachable; sent to the dead-letter queue$/,
        ),
        taskId,
        workflow: 'checkout',
        stepKey: 'hold-seat',
      },
      {
        level: 'warn',
        message: `Task ${taskId} (checkout) ended partial_rollback: CARD_DECLINED: see its dead letters`,
        taskId,
        workflow: 'checkout',
        code: 'CARD_DECLINED', // the step's own error code, kept in the task's error
      },
    ]);
  });

  it('prints the same sentence as before through the default text logger', async () => {
    console = captureConsole();
    const taskId = await rollBackOne(new ConsoleLogger({ colors: false }));

    const line = await eventually('the rollback’s end is logged', () =>
      console!.lines.find((text) => text.includes(`Task ${taskId} (checkout) ended partial_rollback`)),
    );
    expect(line).toMatch(/ WARN \[Duraflow\] Task \S+ \(checkout\) ended partial_rollback: CARD_DECLINED: see its dead letters$/);
  });
});
