import { join } from 'node:path';
import { SpanStatusCode, trace } from '@opentelemetry/api';
import { TaskStatus, WorkflowService } from '@duraflow/nestjs';
import type { SpansRequest } from './fixtures/observability/traced-worker-main';
import { checkoutWorkflow } from './fixtures/observability/workflows';
import { SUBMIT_ONLY, TEST_DURAFLOW_OPTIONS, useTestBed } from './support/test-bed';
import { installTracing, SpanSummary } from './support/tracing';
import { eventually } from './support/waiting';
import { stopAllWorkerProcesses, withWorkerOutputOnFailure, WorkerProcess } from './support/worker-process';

const TRACED_WORKER_ENTRY = join(__dirname, 'fixtures/observability/traced-worker-main.ts');

/*
 * A request's trace goes on in the process that runs its task: the test process submits under an
 * active span (its context is stored with the task), a real worker process claims and runs the
 * task, and the spans that process exports belong to the same trace, its run span a child of the
 * submitting span.
 */
describe('tracing: across processes', () => {
  const bed = useTestBed();
  let tracing: ReturnType<typeof installTracing>;

  beforeAll(() => {
    tracing = installTracing();
  });
  afterAll(() => tracing.uninstall());
  afterEach(() => stopAllWorkerProcesses());

  it(
    'continues the submitting span’s trace in the worker process that runs the task',
    withWorkerOutputOnFailure(async () => {
      const app = await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [checkoutWorkflow()] } });
      const worker = bed.closeLater(
        new WorkerProcess<SpansRequest>({
          entry: TRACED_WORKER_ENTRY,
          label: 'traced',
          config: { databaseUrl: bed.db.url, duraflow: { ...TEST_DURAFLOW_OPTIONS, workerId: 'traced-worker' } },
        }),
        (child) => child.stop(),
      );
      await worker.ready;

      const workflows = app.get(WorkflowService);
      const { task, request } = await trace.getTracer('test').startActiveSpan('POST /checkout', async (span) => {
        const submitted = await workflows.submit('checkout', { decline: true });
        span.end();
        return { task: submitted, request: span.spanContext() };
      });
      const done = await workflows.waitFor(task.id, { timeoutMs: 30_000 });
      expect(done.status).toBe(TaskStatus.ROLLED_BACK);
      expect(done.workerId).toBe('traced-worker');

      const spans = await eventually('the worker exported the run span', async () => {
        const finished = await worker.request<SpanSummary[]>({ type: 'spans' });
        return finished.some((span) => span.name === 'duraflow.run checkout') ? finished : undefined;
      });
      const run = spans!.find((span) => span.name === 'duraflow.run checkout')!;
      expect(run).toMatchObject({
        traceId: request.traceId,
        parentSpanId: request.spanId,
        attributes: { 'duraflow.task_id': task.id, 'duraflow.outcome': 'rolled_back' },
        status: { code: SpanStatusCode.ERROR },
      });
      // Every span the worker made for the task is in the request's trace, under the run span.
      const children = spans!.filter((span) => span !== run);
      expect(children.map((span) => span.name).sort()).toEqual([
        'duraflow.compensate hold-seat',
        'duraflow.compensate reserve',
        'duraflow.step charge',
        'duraflow.step charge',
        'duraflow.step hold-seat',
        'duraflow.step reserve',
      ]);
      for (const span of children) expect(span).toMatchObject({ traceId: request.traceId, parentSpanId: run.spanId });
    }),
  );
});
