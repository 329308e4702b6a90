/** How one execution of a claimed task ended, as far as this worker knows. */
export type RunOutcome =
  | 'completed'
  | 'failed'
  | 'rolled_back'
  | 'partial_rollback'
  | 'cancelled'
  | 'stopped'
  | 'unrecorded'
  /** The determinism guard held the run: its code took another path than the one it recorded. */
  | 'held'
  /** The run reached a wait (sleep, signal, child) that is not over: the task is `pending` again until it is. */
  | 'suspended';
