import { Injectable } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import { Compensate, Step, TaskStatus, Workflow, WorkflowContext, WorkflowService, workflow } from '@duraflow/nestjs';
import { useTestBed } from './support/test-bed';

@Injectable()
class Greeter {
  greet(name: string) {
    return `hello ${name}`;
  }
}

@Workflow('greeting')
class GreetingWorkflow {
  constructor(private readonly greeter: Greeter) {}

  async run(ctx: WorkflowContext<{ name: string }>) {
    const greeting = await this.makeGreeting(ctx.input.name);
    const shout = await ctx.step.run('shout', () => greeting.toUpperCase());
    return { greeting, shout };
  }

  @Step('make-greeting')
  makeGreeting(name: string) {
    return this.greeter.greet(name);
  }

  @Compensate('make-greeting')
  undo() {}
}

const sum = workflow('sum', async (ctx: WorkflowContext<{ a: number; b: number }>) => {
  const total = await ctx.step.run('add', () => ctx.input.a + ctx.input.b);
  return { total };
});

describe('a host app with a decorated and a functional workflow', () => {
  const bed = useTestBed();
  let app: TestingModule;

  beforeAll(async () => {
    app = await bed.start({ providers: [Greeter, GreetingWorkflow], duraflow: { workflows: [sum] } });
  });

  it('runs a decorated and a functional workflow to completion', async () => {
    const workflows = app.get(WorkflowService);
    const a = await workflows.submit('greeting', { name: 'ada' });
    const b = await workflows.submit('sum', { a: 2, b: 3 });
    const doneA = await workflows.waitFor(a.id, { timeoutMs: 5000 });
    const doneB = await workflows.waitFor(b.id, { timeoutMs: 5000 });
    expect(doneA.status).toBe(TaskStatus.COMPLETED);
    expect(doneA.output).toEqual({ greeting: 'hello ada', shout: 'HELLO ADA' });
    expect(doneB.output).toEqual({ total: 5 });
    const steps = await workflows.getSteps(a.id);
    expect(steps.map((s) => [s.stepKey, s.status, s.compensationFn])).toEqual([
      ['make-greeting', 'completed', 'greeting.undo'],
      ['shout', 'completed', null],
    ]);
  });
});

// Without the migrations, synchronize alone is refused at boot (test/schema-check.spec.ts); over them it changes nothing.
describe('a host app with TypeORM synchronize on over the migrated schema', () => {
  const bed = useTestBed();
  let app: TestingModule;

  beforeAll(async () => {
    app = await bed.start({ typeorm: { synchronize: true }, duraflow: { workflows: [sum] } });
  });

  it('runs workflows, with idempotent submits, on the tables synchronize leaves as they are', async () => {
    const workflows = app.get(WorkflowService);
    const first = await workflows.submit('sum', { a: 1, b: 2 }, { idempotencyKey: 'once' });
    const again = await workflows.submit('sum', { a: 1, b: 2 }, { idempotencyKey: 'once' });
    expect(again.id).toBe(first.id);
    const done = await workflows.waitFor(first.id, { timeoutMs: 5000 });
    expect(done.status).toBe(TaskStatus.COMPLETED);
    expect(done.output).toEqual({ total: 3 });
    expect(await bed.rows.count('agent_tasks')).toBe(1);
  });
});
