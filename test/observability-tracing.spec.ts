import { SpanStatusCode, trace } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { SagaService, TaskStatus, WorkflowService } from '@duraflow/nestjs';
import { checkoutWorkflow, holdWorkflow } from './fixtures/observability/workflows';
import { useTestBed } from './support/test-bed';
import { installTracing, summarize, SpanSummary } from './support/tracing';
import { eventually } from './support/waiting';

/*
 * OpenTelemetry in the process that submits and runs: a span per run, per step attempt and per
 * compensation, with their attributes and errors, under the span that was active at submit (its
 * W3C context stored with the task). The tracer is the SDK's, exporting to memory.
 */

describe('tracing: with no tracer configured', () => {
  const bed = useTestBed();

  it('stores no trace context and the run goes as before', async () => {
    const app = await bed.start({ duraflow: { workflows: [checkoutWorkflow()] } });
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('checkout', {});
    expect((await workflows.waitFor(task.id)).status).toBe(TaskStatus.COMPLETED);
    expect((await bed.rows.task(task.id)).trace_context).toBeNull();
  });
});

describe('tracing: with a tracer provider registered', () => {
  const bed = useTestBed();
  let tracing: ReturnType<typeof installTracing>;
  const exporter = () => tracing.exporter as InMemorySpanExporter;
  const activeSpanIds = new Map<string, string | undefined>();

  beforeAll(() => {
    tracing = installTracing();
  });
  afterAll(() => tracing.uninstall());
  beforeEach(() => exporter().reset());

  let lastApp: Awaited<ReturnType<typeof bed.start>> | undefined;

  async function submitUnderSpan(input: object) {
    const app = (lastApp = await bed.start({
      duraflow: { workflows: [checkoutWorkflow(activeSpanIds, () => trace.getActiveSpan()?.spanContext().spanId)] },
    }));
    const workflows = app.get(WorkflowService);
    const tracer = trace.getTracer('test');
    const { task, request } = await tracer.startActiveSpan('POST /checkout', async (span) => {
      const submitted = await workflows.submit('checkout', input);
      span.end();
      return { task: submitted, request: span.spanContext() };
    });
    const done = await workflows.waitFor(task.id);
    // The run's span ends once its outcome is written: a moment after waitFor can see it.
    const spans = await eventually<SpanSummary[] | undefined>('the run span is exported', () => {
      const all = exporter().getFinishedSpans().map(summarize);
      return all.some((span) => span.name === 'duraflow.run checkout') ? all : undefined;
    });
    return { done, request, spans: spans! };
  }

  it('stores the submitting span’s W3C context with the task', async () => {
    const { done, request } = await submitUnderSpan({});
    const row = await bed.rows.task(done.id);
    expect(row.trace_context).toEqual({ traceparent: `00-${request.traceId}-${request.spanId}-01` });
  });

  it('records a completed run as a child of the submitting span, with a span per step under it', async () => {
    const { done, request, spans } = await submitUnderSpan({});
    expect(done.status).toBe(TaskStatus.COMPLETED);
    const run = only(spans, 'duraflow.run checkout');
    expect(run).toMatchObject({
      traceId: request.traceId,
      parentSpanId: request.spanId,
      attributes: { 'duraflow.task_id': done.id, 'duraflow.workflow': 'checkout', 'duraflow.attempt': 1, 'duraflow.outcome': 'completed' },
      status: { code: SpanStatusCode.UNSET },
    });
    for (const key of ['reserve', 'hold-seat', 'charge']) {
      expect(only(spans, `duraflow.step ${key}`)).toMatchObject({
        traceId: request.traceId,
        parentSpanId: run.spanId,
        attributes: {
          'duraflow.task_id': done.id,
          'duraflow.workflow': 'checkout',
          'duraflow.step_key': key,
          'duraflow.attempt': 1,
          'duraflow.outcome': 'completed',
        },
        status: { code: SpanStatusCode.UNSET },
      });
    }
    // The step's code runs with its span active, so what it calls (an instrumented HTTP client) nests under it.
    expect(activeSpanIds.get(`${done.id}/reserve`)).toBe(only(spans, 'duraflow.step reserve').spanId);
  });

  it('records failed attempts, compensations and the rollback with their errors and ERROR status', async () => {
    const { done, request, spans } = await submitUnderSpan({ decline: true, seatUndoFails: true });
    expect(done.status).toBe(TaskStatus.PARTIAL_ROLLBACK);

    const run = only(spans, 'duraflow.run checkout');
    expect(run).toMatchObject({
      traceId: request.traceId,
      parentSpanId: request.spanId,
      attributes: { 'duraflow.task_id': done.id, 'duraflow.outcome': 'partial_rollback' },
      status: { code: SpanStatusCode.ERROR, message: 'card declined' },
      exceptions: ['card declined'],
    });

    const charges = spans.filter((span) => span.name === 'duraflow.step charge');
    expect(charges.map((span) => span.attributes['duraflow.attempt'])).toEqual([1, 2]);
    for (const charge of charges) {
      expect(charge).toMatchObject({
        parentSpanId: run.spanId,
        attributes: { 'duraflow.step_key': 'charge', 'duraflow.outcome': 'failed' },
        status: { code: SpanStatusCode.ERROR, message: 'card declined' },
        exceptions: ['card declined'],
      });
    }

    // Newest first: hold-seat's undo fails (a dead letter), reserve's succeeds.
    const compensations = spans.filter((span) => span.name.startsWith('duraflow.compensate '));
    expect(compensations.map((span) => span.name)).toEqual(['duraflow.compensate hold-seat', 'duraflow.compensate reserve']);
    expect(compensations[0]).toMatchObject({
      traceId: request.traceId,
      parentSpanId: run.spanId,
      attributes: { 'duraflow.task_id': done.id, 'duraflow.step_key': 'hold-seat', 'duraflow.attempt': 1, 'duraflow.outcome': 'failed' },
      status: { code: SpanStatusCode.ERROR, message: 'seat service unreachable' },
      exceptions: ['seat service unreachable'],
    });
    expect(compensations[1]).toMatchObject({
      parentSpanId: run.spanId,
      attributes: { 'duraflow.step_key': 'reserve', 'duraflow.outcome': 'compensated' },
      status: { code: SpanStatusCode.UNSET },
      exceptions: [],
    });
  });

  it('records the rollback of a cancel with compensation under the cancelling caller’s span', async () => {
    const app = await bed.start({ duraflow: { workflows: [holdWorkflow] } });
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('hold', {});
    await eventually('the reserve step is checkpointed', async () => (await bed.rows.completedStepKeys(task.id)).includes('reserve'));

    const { cancelled, request } = await trace.getTracer('test').startActiveSpan('POST /tasks/:id/cancel', async (span) => {
      const result = await workflows.cancel(task.id, { compensate: true });
      span.end();
      return { cancelled: result, request: span.spanContext() };
    });
    expect(cancelled.status).toBe(TaskStatus.CANCELLED);

    const spans = exporter().getFinishedSpans().map(summarize);
    const rollback = spans.find((span) => span.name === 'duraflow.run hold' && span.parentSpanId === request.spanId);
    expect(rollback).toMatchObject({
      traceId: request.traceId,
      attributes: { 'duraflow.task_id': task.id, 'duraflow.outcome': 'cancelled' },
    });
    expect(only(spans, 'duraflow.compensate reserve')).toMatchObject({
      traceId: request.traceId,
      parentSpanId: rollback!.spanId,
      attributes: { 'duraflow.outcome': 'compensated' },
    });
  });

  it('records a dead letter’s retry as a compensation span under the caller’s span', async () => {
    const { done } = await submitUnderSpan({ decline: true, seatUndoFails: true });
    const [entry] = await bed.rows.deadLetters(done.id);
    exporter().reset();

    const { retried, request } = await trace.getTracer('test').startActiveSpan('POST /dead-letters/:id/retry', async (span) => {
      const result = await lastApp!.get(SagaService).retryDeadLetter(entry.id);
      span.end();
      return { retried: result, request: span.spanContext() };
    });
    expect(retried.outcome).toBe('failed'); // its saved output still says the seat service fails

    expect(only(exporter().getFinishedSpans().map(summarize), 'duraflow.compensate hold-seat')).toMatchObject({
      traceId: request.traceId,
      parentSpanId: request.spanId,
      attributes: {
        'duraflow.task_id': done.id,
        'duraflow.workflow': 'checkout',
        'duraflow.step_key': 'hold-seat',
        'duraflow.dead_letter_id': entry.id,
        'duraflow.attempt': 1,
        'duraflow.outcome': 'failed',
      },
      status: { code: SpanStatusCode.ERROR, message: 'seat service unreachable' },
    });
  });

  it('starts a trace of its own for a task submitted with no active span', async () => {
    const app = await bed.start({ duraflow: { workflows: [checkoutWorkflow()] } });
    const workflows = app.get(WorkflowService);
    const task = await workflows.submit('checkout', {});
    await workflows.waitFor(task.id);
    expect((await bed.rows.task(task.id)).trace_context).toBeNull();
    const run = await eventually('the run span is exported', () =>
      exporter()
        .getFinishedSpans()
        .map(summarize)
        .find((span) => span.name === 'duraflow.run checkout' && span.attributes['duraflow.task_id'] === task.id),
    );
    expect(run!.parentSpanId).toBeUndefined();
  });
});

function only(spans: SpanSummary[], name: string): SpanSummary {
  const found = spans.filter((span) => span.name === name);
  if (found.length !== 1)
    throw new Error(`Expected one span "${name}", found ${found.length}: ${spans.map((span) => span.name).join(', ')}`);
  return found[0];
}
