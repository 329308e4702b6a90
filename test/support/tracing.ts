import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, ReadableSpan, SimpleSpanProcessor, SpanExporter } from '@opentelemetry/sdk-trace-base';

/**
 * OpenTelemetry as a host configures it (a tracer provider, the AsyncLocalStorage context manager,
 * the W3C propagator), registered globally for this process, exporting to `exporter` (in memory by default).
 */
export function installTracing(exporter: SpanExporter = new InMemorySpanExporter()): {
  exporter: SpanExporter;
  uninstall(): Promise<void>;
} {
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  return {
    exporter,
    async uninstall() {
      await provider.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}

/** What the specs compare of a finished span. */
export interface SpanSummary {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  attributes: Record<string, unknown>;
  status: { code: number; message?: string };
  exceptions: string[];
}

export function summarize(span: ReadableSpan): SpanSummary {
  return {
    name: span.name,
    traceId: span.spanContext().traceId,
    spanId: span.spanContext().spanId,
    parentSpanId: span.parentSpanContext?.spanId,
    attributes: { ...span.attributes },
    status: { ...span.status },
    exceptions: span.events.filter((event) => event.name === 'exception').map((event) => String(event.attributes?.['exception.message'])),
  };
}
