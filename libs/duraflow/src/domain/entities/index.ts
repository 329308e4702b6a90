import { AgentTask } from './agent-task.entity';
import { DeadLetter } from './dead-letter.entity';
import { StepRun } from './step-run.entity';

export { AgentTask, TaskError, RollbackReason, TaskHistoryEntry, TaskRetriedEntry, TaskForkedEntry, ForkOrigin } from './agent-task.entity';
export { StepRun, StepRunStatus, StepKind } from './step-run.entity';
export { DeadLetter } from './dead-letter.entity';

/** The three tables, for the host's `TypeOrmModule.forRoot({ entities: [...DURAFLOW_ENTITIES] })`. */
export const DURAFLOW_ENTITIES = [AgentTask, StepRun, DeadLetter];
