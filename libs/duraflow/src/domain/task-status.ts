/** A task's status, as `agent_tasks.status` stores it (lowercase, `_` between words). */
export enum TaskStatus {
  PENDING = 'pending',
  RUNNING = 'running',
  COMPLETED = 'completed',
  FAILED = 'failed',
  CANCELLED = 'cancelled',
  ROLLED_BACK = 'rolled_back',
  PARTIAL_ROLLBACK = 'partial_rollback',
}

/** Statuses a task never leaves. */
export const TERMINAL_STATUSES: readonly TaskStatus[] = [
  TaskStatus.COMPLETED,
  TaskStatus.FAILED,
  TaskStatus.CANCELLED,
  TaskStatus.ROLLED_BACK,
  TaskStatus.PARTIAL_ROLLBACK,
];

export function isTerminalStatus(status: string): boolean {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

/**
 * Held by the determinism guard now: `pending` with `heldAt` set (a task cancelled while held
 * keeps its `heldAt`, but is no longer held). The lifecycle's SQL twin is `held()`
 * (persistence/lifecycle/task-lifecycle.ts).
 */
export function isHeld(task: { status: string; heldAt?: Date | null }): boolean {
  return task.status === TaskStatus.PENDING && task.heldAt !== null && task.heldAt !== undefined;
}
