import { Injectable } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import {
  Compensate,
  DURAFLOW_ENTITIES,
  DuraflowModule,
  Step,
  TaskStatus,
  Workflow,
  WorkflowContext,
  WorkflowService,
  workflow,
} from '@duraflow/nestjs';
import { initTestingModule, startTestApp, TEST_DURAFLOW_OPTIONS } from './support/app';
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

describe('a host app with a decorated and a functional workflow', () => {
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

describe('a host app whose schema TypeORM synchronized from DURAFLOW_ENTITIES (no migrations)', () => {
  let db: TestDatabase;
  let app: TestingModule;

  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
    const moduleRef = await Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url, entities: [...DURAFLOW_ENTITIES], synchronize: true }),
        DuraflowModule.forRoot({ ...TEST_DURAFLOW_OPTIONS, workflows: [sum] }),
      ],
    }).compile();
    moduleRef.useLogger(['error', 'warn']);
    app = await initTestingModule(moduleRef);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('runs workflows, with idempotent submits, on the synchronized tables', async () => {
    const workflows = app.get(WorkflowService);
    const first = await workflows.submit('sum', { a: 1, b: 2 }, { idempotencyKey: 'once' });
    const again = await workflows.submit('sum', { a: 1, b: 2 }, { idempotencyKey: 'once' });
    expect(again.id).toBe(first.id);
    const done = await workflows.waitFor(first.id, { timeoutMs: 5000 });
    expect(done.status).toBe(TaskStatus.COMPLETED);
    expect(done.output).toEqual({ total: 3 });
    const { rows } = await db.client.query(`SELECT count(*)::int AS n FROM agent_tasks`);
    expect(rows[0].n).toBe(1);
  });
});
