/** The instrumentation scope (tracer name) of Duraflow's spans. In a file of its own: the public types never name @opentelemetry/api. */
export const DURAFLOW_TRACER_NAME = '@duraflow/nestjs';
