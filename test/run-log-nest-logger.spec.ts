import { LoggerService } from '@nestjs/common';
import { TaskStatus, workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { useTestBed } from './support/test-bed';

/*
 * ctx.log also goes to Nest's Logger (context DuraflowRun) at once, with the task's id, workflow and
 * step key as fields: wherever the host sends Nest's logs, the run's lines are there too.
 */

const bed = useTestBed();

/** One call Nest's Logger made: its level, what it was given and its context. */
interface Call {
  level: string;
  message: unknown;
  context: unknown;
}

/** A host's logger that keeps every call as it is given (the record, not its text). */
class KeptCalls implements LoggerService {
  readonly calls: Call[] = [];

  log(message: unknown, ...rest: unknown[]): void {
    this.keep('log', message, rest);
  }

  warn(message: unknown, ...rest: unknown[]): void {
    this.keep('warn', message, rest);
  }

  error(message: unknown, ...rest: unknown[]): void {
    this.keep('error', message, rest);
  }

  debug(message: unknown, ...rest: unknown[]): void {
    this.keep('debug', message, rest);
  }

  verbose(message: unknown, ...rest: unknown[]): void {
    this.keep('verbose', message, rest);
  }

  private keep(level: string, message: unknown, rest: unknown[]): void {
    this.calls.push({ level, message, context: rest[rest.length - 1] });
  }
}

const receipt = workflow('nest-logged', async (ctx: WorkflowContext<{ order: string }>) => {
  ctx.log.info(`order ${ctx.input.order} received`);
  await ctx.step.run('charge', () => {
    ctx.log.warn('card needs 3-D Secure', { psp: 'acme' });
    return 'charged';
  });
  ctx.log.error('receipt printer offline');
});

describe('run logs through Nest’s Logger', () => {
  it('emits each ctx.log line to the host’s logger with context DuraflowRun, its message and the task id', async () => {
    const logger = new KeptCalls();
    const app = await bed.start({ duraflow: { workflows: [receipt] }, logger });
    const workflows = app.get(WorkflowService);

    const task = await workflows.submit('nest-logged', { order: 'A-17' });
    expect((await workflows.waitFor(task.id, { timeoutMs: 20_000 })).status).toBe(TaskStatus.COMPLETED);

    const runLines = logger.calls
      .filter((call) => call.context === 'DuraflowRun')
      .map(({ level, message }) => ({ level, text: String(message), fields: { ...(message as object) } }));
    expect(runLines).toEqual([
      {
        level: 'log',
        text: 'order A-17 received',
        fields: { message: 'order A-17 received', taskId: task.id, workflow: 'nest-logged' },
      },
      {
        level: 'warn',
        text: 'card needs 3-D Secure',
        fields: { message: 'card needs 3-D Secure', taskId: task.id, workflow: 'nest-logged', stepKey: 'charge' },
      },
      {
        level: 'error',
        text: 'receipt printer offline',
        fields: { message: 'receipt printer offline', taskId: task.id, workflow: 'nest-logged' },
      },
    ]);
    // The same lines are kept with the run.
    expect((await workflows.getLogs(task.id)).items.map((line) => line.message)).toEqual(runLines.map((line) => line.text));
  });
});
