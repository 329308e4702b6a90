import { AgentTask } from '../domain/entities/agent-task.entity';
import { NewFork } from '../persistence/lifecycle/fork-task';

/**
 * A fork of `original` from `fromStep` with the original's input and version, made from its row
 * alone: what `TaskFactory.prepare` would compute from the workflow's registration is already on
 * the row (the version it ran, the input checked when it was submitted, the flow-control key
 * derived from that input, its priority and retries), so it needs no workflow code and the
 * command line can make it. It runs now and holds no idempotency key; nothing written.
 * `traceContextJson`: the trace the fork continues (the factory's caller's), or null.
 */
export function forkOfRow(original: AgentTask, fromStep: string, traceContextJson: string | null): NewFork {
  return {
    workflowName: original.workflowName,
    inputJson: JSON.stringify(original.input ?? null),
    priority: original.priority ?? 0,
    scheduledAt: null,
    maxRetries: original.maxRetries,
    idempotencyKey: null,
    traceContextJson,
    workflowVersion: original.workflowVersion ?? null,
    concurrencyKey: original.concurrencyKey ?? null,
    parentTaskId: null,
    parentStepKey: null,
    forkedFrom: { taskId: original.id, fromStep },
    tags: original.tags ?? {},
  };
}
