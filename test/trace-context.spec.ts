import { context, propagation, trace } from '@opentelemetry/api';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { TaskStatus, workflow, WorkflowContext, WorkflowService } from '@duraflow/nestjs';
import { traceContextOf } from '../libs/duraflow/src/observability/tracing';
import { SUBMIT_ONLY, useTestBed } from './support/test-bed';
import { installTracing } from './support/tracing';

/*
 * A task keeps only the W3C `traceparent` and `tracestate` of its submitter's context: baggage
 * (which any client can send, and which would reach every step of the run) is never stored, never
 * copied to children, and never seen by step code, also for a row that carries it from before.
 */

const bed = useTestBed({ databasePerTest: true });

/** The baggage each step body saw, by task id. */
const seen = new Map<string, string[]>();
const baggageNow = () => (propagation.getBaggage(context.active())?.getAllEntries() ?? []).map(([key, entry]) => `${key}=${entry.value}`);

const child = workflow('bag-child', async (ctx: WorkflowContext) => {
  await ctx.step.run('look', () => void seen.set(ctx.runId, baggageNow()));
  return 'child done';
});
const parent = workflow('bag-parent', async (ctx: WorkflowContext) => {
  await ctx.step.run('look', () => void seen.set(ctx.runId, baggageNow()));
  return ctx.runChild('child', 'bag-child');
});

/** 180 baggage entries, a tenant among them, as a client's `baggage` header could carry them. */
function clientBaggage() {
  const entries: Record<string, { value: string }> = { tenant: { value: 'acme-admin' } };
  for (let i = 0; i < 179; i++) entries[`k${i}`] = { value: `v${i}`.padEnd(30, 'x') };
  return propagation.createBaggage(entries);
}

describe('the trace context a task keeps', () => {
  let tracing: ReturnType<typeof installTracing>;

  beforeAll(() => {
    tracing = installTracing();
    propagation.disable();
    propagation.setGlobalPropagator(
      new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
    );
  });
  afterAll(() => tracing.uninstall());

  it('stores traceparent and tracestate only, never the baggage sent with them; the run and its child see no baggage', async () => {
    const app = await bed.start({ duraflow: { workflows: [parent, child] } });
    const workflows = app.get(WorkflowService);
    const tracer = trace.getTracer('test');
    const withBaggage = propagation.setBaggage(context.active(), clientBaggage());
    const { task, traceId } = await context.with(withBaggage, () =>
      tracer.startActiveSpan('POST /orders', async (span) => {
        const submitted = await workflows.submit('bag-parent', {});
        span.end();
        return { task: submitted, traceId: span.spanContext().traceId };
      }),
    );
    expect((await workflows.waitFor(task.id, { timeoutMs: 30_000 })).status).toBe(TaskStatus.COMPLETED);

    const stored = (await bed.rows.task(task.id)).trace_context;
    expect(Object.keys(stored)).toEqual(['traceparent']);
    expect(stored.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    const [childTask] = await workflows.getChildren(task.id);
    expect(Object.keys((await bed.rows.task(childTask.id)).trace_context)).toEqual(['traceparent']);
    expect(seen.get(task.id)).toEqual([]);
    expect(seen.get(childTask.id)).toEqual([]);
  });

  it('gives the run of a row stored with baggage (before only the two were kept) none of it, nor to its child', async () => {
    const submitter = (await bed.start({ duraflow: { ...SUBMIT_ONLY, workflows: [parent, child] } })).get(WorkflowService);
    const task = await submitter.submit('bag-parent', {});
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    await bed.db.client.query(`UPDATE agent_tasks SET trace_context = $2 WHERE id = $1`, [
      task.id,
      JSON.stringify({ traceparent, baggage: 'tenant=acme-admin,role=root' }),
    ]);

    const workflows = (await bed.start({ duraflow: { workflows: [parent, child] } })).get(WorkflowService);
    expect((await workflows.waitFor(task.id, { timeoutMs: 30_000 })).status).toBe(TaskStatus.COMPLETED);
    const [childTask] = await workflows.getChildren(task.id);
    expect((await bed.rows.task(childTask.id)).trace_context).toEqual({ traceparent });
    expect(seen.get(task.id)).toEqual([]);
    expect(seen.get(childTask.id)).toEqual([]);
  });
});

describe('traceContextOf', () => {
  const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

  it('keeps a valid traceparent and tracestate, and nothing else', () => {
    expect(traceContextOf({ traceparent, tracestate: 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7', baggage: 'a=b', other: 'x' })).toEqual({
      traceparent,
      tracestate: 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7',
    });
  });

  it('keeps no context without a well-formed traceparent', () => {
    for (const bad of [undefined, '', 'nonsense', traceparent.toUpperCase(), `${traceparent}\n`, `${traceparent}-${'x'.repeat(300)}`]) {
      expect(traceContextOf({ traceparent: bad, tracestate: 'a=b' })).toBeNull();
    }
  });

  it('drops a tracestate over 512 characters, over 32 members, or with characters outside printable ASCII', () => {
    const members33 = Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(',');
    for (const tracestate of ['a='.padEnd(513, 'x'), members33, 'a=b\u0000', 'a=é']) {
      expect(traceContextOf({ traceparent, tracestate })).toEqual({ traceparent });
    }
  });
});
