import { SpanStatusCode, trace } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { TaskStatus, workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { useTestBed } from './support/test-bed';
import { installTracing, SpanSummary, summarize } from './support/tracing';
import { eventually } from './support/waiting';

/*
 * Tracing across the durable primitives: a run that waits for a child and sleeps is claimed three
 * times; each claim is a `duraflow.run` span under the span that submitted the task, and a step
 * memoized on a later claim makes no span again.
 */

const leaf = workflow('traced-leaf', async (ctx: WorkflowContext) => ctx.step.run('leaf-step', () => 'leaf-done'));
const parent = workflow('traced-parent', async (ctx: WorkflowContext) => {
  await ctx.step.run('a', () => 'a-done');
  const kid = await ctx.runChild<string>('kid', 'traced-leaf', {});
  await ctx.sleep('nap', 10);
  return ctx.step.run('b', () => `b-after-${kid}`);
});

describe('tracing across sleeps and child workflows', () => {
  const bed = useTestBed();
  let tracing: ReturnType<typeof installTracing>;
  const exporter = () => tracing.exporter as InMemorySpanExporter;

  beforeAll(() => {
    tracing = installTracing();
  });
  afterAll(() => tracing.uninstall());

  it('records each claim of a waiting run as a run span under the submitting span, its steps once each, the child run its own', async () => {
    const app = await bed.start({ duraflow: { workflows: [parent, leaf], worker: { pollIntervalMs: 20 } } });
    const workflows = app.get(WorkflowService);
    const { task, request } = await trace.getTracer('test').startActiveSpan('POST /orders', async (span) => {
      const submitted = await workflows.submit('traced-parent', {});
      span.end();
      return { task: submitted, request: span.spanContext() };
    });
    const done = await workflows.waitFor(task.id, { timeoutMs: 20_000 });
    expect(done.status).toBe(TaskStatus.COMPLETED);
    expect(done.output).toBe('b-after-leaf-done');

    const spans = (await eventually<SpanSummary[] | undefined>('the last run span is exported', () => {
      const all = exporter().getFinishedSpans().map(summarize);
      return all.some((span) => span.name === 'duraflow.run traced-parent' && span.attributes['duraflow.outcome'] === 'completed')
        ? all
        : undefined;
    }))!;
    const runs = spans.filter((span) => span.name === 'duraflow.run traced-parent');
    expect(runs.map((run) => run.attributes['duraflow.outcome'])).toEqual(['suspended', 'suspended', 'completed']);
    for (const run of runs) {
      expect(run).toMatchObject({
        traceId: request.traceId,
        parentSpanId: request.spanId,
        attributes: { 'duraflow.task_id': task.id, 'duraflow.workflow': 'traced-parent' },
        status: { code: SpanStatusCode.UNSET },
      });
    }
    // Each step body ran once, under the run that ran it: a (first claim), b (last claim).
    const stepSpans = spans.filter((span) => span.name.startsWith('duraflow.step ') && span.attributes['duraflow.task_id'] === task.id);
    expect(stepSpans.map((span) => [span.name, span.parentSpanId])).toEqual([
      ['duraflow.step a', runs[0].spanId],
      ['duraflow.step b', runs[2].spanId],
    ]);
    const [child] = await workflows.getChildren(task.id);
    const childRun = spans.find((span) => span.name === 'duraflow.run traced-leaf');
    expect(childRun).toMatchObject({ attributes: { 'duraflow.task_id': child.id, 'duraflow.outcome': 'completed' } });
    // The child continues the trace its parent was submitted in, under the same submitting span.
    expect(childRun).toMatchObject({ traceId: request.traceId, parentSpanId: request.spanId });
  });
});
