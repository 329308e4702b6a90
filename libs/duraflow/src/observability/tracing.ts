import type * as Otel from '@opentelemetry/api';
import { loadOpenTelemetryApi } from '../dependencies/optional-dependencies';

import { DURAFLOW_TRACER_NAME } from './tracer-name';

/** The attributes Duraflow's spans carry (only those that apply). */
export interface DuraflowSpanAttributes {
  'duraflow.task_id': string;
  'duraflow.workflow': string;
  'duraflow.step_key'?: string;
  'duraflow.attempt'?: number;
  'duraflow.dead_letter_id'?: string;
}

/**
 * OpenTelemetry for one DuraflowModule: on only when `@opentelemetry/api` is installed and the
 * host registered a tracer provider (anything but the API's no-op one), decided once when the
 * module starts. Off, nothing here is called at all: the hooks see no tracing and run the code
 * they wrap as it is. The API itself is loaded lazily, so the package never needs it.
 */
export class DuraflowTracing {
  private constructor(
    private readonly api: typeof Otel,
    private readonly tracer: Otel.Tracer,
  ) {}

  /** The tracing of this process, or undefined when no tracer is configured (or OpenTelemetry is not installed). */
  static detect(): DuraflowTracing | undefined {
    const api = loadOpenTelemetryApi();
    if (!api) return undefined;
    const global = api.trace.getTracerProvider();
    const delegate = global instanceof api.ProxyTracerProvider ? global.getDelegate() : global;
    // A fresh proxy's delegate is the API's own no-op provider: the one a host that configured nothing has.
    const noop = new api.ProxyTracerProvider().getDelegate();
    if (delegate === noop) return undefined;
    return new DuraflowTracing(api, api.trace.getTracer(DURAFLOW_TRACER_NAME));
  }

  /**
   * The active trace context, as the propagation API writes it, cut to `traceparent` and
   * `tracestate` (traceContextOf), in JSON for `agent_tasks.trace_context`; null when no span is
   * active or no propagator writes a valid `traceparent`.
   */
  captureContext(): string | null {
    const { api } = this;
    if (!api.trace.getSpanContext(api.context.active())) return null;
    const carrier: Record<string, string> = {};
    api.propagation.inject(api.context.active(), carrier);
    const kept = traceContextOf(carrier);
    return kept ? JSON.stringify(kept) : null;
  }

  /**
   * The context a run continues: the submitter's, extracted from what the task stored, else none
   * (a trace of its own). Never the context active in the worker, which may be another run's.
   */
  runParent(stored: Record<string, string> | null | undefined): Otel.Context {
    const { api } = this;
    // Rows written before only these two were kept may carry baggage: it never reaches the run.
    const kept = stored && typeof stored === 'object' ? traceContextOf(stored) : null;
    return kept ? api.propagation.extract(api.ROOT_CONTEXT, kept) : api.ROOT_CONTEXT;
  }

  /** The active context, for spans whose parent is whatever the caller runs under. */
  active(): Otel.Context {
    return this.api.context.active();
  }

  /** Starts a span under `parent`; `context` is `parent` with the span in it, for its children and for code run inside it. */
  start(name: string, parent: Otel.Context, attributes: DuraflowSpanAttributes): { span: Otel.Span; context: Otel.Context } {
    const span = this.tracer.startSpan(name, { kind: this.api.SpanKind.INTERNAL, attributes: { ...attributes } }, parent);
    return { span, context: this.api.trace.setSpan(parent, span) };
  }

  /** Runs `fn` with `context` active (seen by code that reads the active span, when the host set a context manager). */
  within<T>(context: Otel.Context, fn: () => T): T {
    return this.api.context.with(context, fn);
  }

  /** Ends a span with its outcome; an error is recorded on it and makes its status ERROR. */
  end(span: Otel.Span, outcome: string, error?: unknown): void {
    span.setAttribute('duraflow.outcome', outcome);
    if (error !== undefined) {
      span.recordException(exceptionOf(error));
      span.setStatus({ code: this.api.SpanStatusCode.ERROR, message: messageOf(error) });
    }
    span.end();
  }
}

/** `version-traceid-parentid-flags`, lowercase hex (W3C Trace Context); a future version may append fields. */
const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-[\x21-\x7e]*)?$/;
const MAX_TRACEPARENT_CHARS = 256;
/** W3C Trace Context: at most 32 list members; vendors are told to keep it within 512 characters. */
const MAX_TRACESTATE_CHARS = 512;
const MAX_TRACESTATE_MEMBERS = 32;
const TRACESTATE = /^[\x20-\x7e]*$/;

/**
 * What of a propagation carrier a task keeps: `traceparent` when it is well-formed, and with it
 * `tracestate` when that is within the W3C bounds; nothing else (baggage, a vendor's headers) is
 * stored, since it would travel with the task into every run and step. Null when no valid
 * `traceparent` is there.
 */
export function traceContextOf(carrier: Record<string, unknown>): { traceparent: string; tracestate?: string } | null {
  const { traceparent, tracestate } = carrier;
  if (typeof traceparent !== 'string' || traceparent.length > MAX_TRACEPARENT_CHARS || !TRACEPARENT.test(traceparent)) return null;
  const stateOk =
    typeof tracestate === 'string' &&
    tracestate.length > 0 &&
    tracestate.length <= MAX_TRACESTATE_CHARS &&
    TRACESTATE.test(tracestate) &&
    tracestate.split(',').length <= MAX_TRACESTATE_MEMBERS;
  return stateOk ? { traceparent, tracestate } : { traceparent };
}

function exceptionOf(error: unknown): Otel.Exception {
  if (error instanceof Error) return error;
  if (error && typeof error === 'object') {
    const { name, message, stack, code } = error as { name?: unknown; message?: unknown; stack?: unknown; code?: unknown };
    return {
      name: typeof name === 'string' ? name : 'Error',
      message: typeof message === 'string' ? message : String(error),
      stack: typeof stack === 'string' ? stack : undefined,
      code: typeof code === 'string' || typeof code === 'number' ? code : undefined,
    };
  }
  return String(error);
}

function messageOf(error: unknown): string {
  const message = (error as { message?: unknown } | null)?.message;
  return typeof message === 'string' ? message : String(error);
}
