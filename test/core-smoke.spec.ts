import { Injectable } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import { Compensate, Step, TaskStatus, Workflow, WorkflowContext, WorkflowService, workflow } from '@duraflow/nestjs';
import { startTestApp } from './support/app';
import { createTestDatabase, TestDatabase } from './support/database';

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

describe('smoke', () => {
  let db: TestDatabase;
  let app: TestingModule;

  beforeAll(async () => {
    db = await createTestDatabase();
    app = await startTestApp({ db, providers: [Greeter, GreetingWorkflow], duraflow: { workflows: [sum] } });
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
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
