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
