import { Injectable } from '@nestjs/common';
import { WorkflowRegistry } from '../../discovery/workflow.registry';
import { UnknownWorkflowError } from '../../domain/errors';
import { FlowLimitStats } from '../../domain/flow-control';
import { ScheduleInfo } from '../../domain/schedule-options';
import { OverviewWindow, TaskOverview, WorkflowStepStats, WorkflowSubscription, WorkflowVersionStatus } from '../../domain/task-overview';
import { DuraflowDatabase } from '../../persistence/duraflow-database';
import { FlowLimitsStore } from '../../persistence/flow-limits.store';
import { readUnfinishedVersions, readWorkflowStepStats, readWorkflowSubscriptions } from '../../persistence/sql/read-workflow-insights';
import { readTaskOverview } from '../../persistence/sql/task-stats';
import { ScheduleReader } from '../../schedules/schedule-reader';

/** The newest runs a workflow's step statistics read, at most (WorkflowService.describeWorkflow). */
export const STEP_STATS_TASKS = 500;
/** ... created within this long. */
export const STEP_STATS_SINCE_MS = 7 * 24 * 3_600_000;

/** What the dashboard's page of one workflow shows (`WorkflowService.describeWorkflow`). */
export interface WorkflowDescription {
  name: string;
  /** The versions this process registers and those unfinished tasks still run, newest first. */
  versions: WorkflowVersionStatus[];
  /** The steps of its newest runs (at most 500, of the last 7 days), in the order they usually complete. */
  steps: WorkflowStepStats[];
  /** Its limits and what waits on them (empty without limits). */
  limits: FlowLimitStats[];
  /** The schedules that start it. */
  schedules: ScheduleInfo[];
  /** The events that start it (`@Workflow(name, { on })`). */
  subscriptions: WorkflowSubscription[];
}

/** Reads that look across tasks, for the person on call: the overview's charts and a workflow's page. */
@Injectable()
export class WorkflowInsights {
  constructor(
    private readonly db: DuraflowDatabase,
    private readonly registry: WorkflowRegistry,
    private readonly flowLimits: FlowLimitsStore,
    private readonly schedules: ScheduleReader,
  ) {}

  overview(window: OverviewWindow = 'day'): Promise<TaskOverview> {
    return readTaskOverview(this.db, window);
  }

  async describe(name: string): Promise<WorkflowDescription> {
    const registered = this.registry.versions(name);
    if (!registered.length) throw new UnknownWorkflowError(name, this.registry.names());
    const [unfinished, steps, limits, schedules, subscriptions] = await Promise.all([
      readUnfinishedVersions(this.db, name),
      readWorkflowStepStats(this.db, name, new Date(Date.now() - STEP_STATS_SINCE_MS), STEP_STATS_TASKS),
      this.flowLimits.readLimits([name]),
      this.schedules.list(),
      readWorkflowSubscriptions(this.db, name),
    ]);
    const versions = new Set([...registered, ...unfinished.map((entry) => entry.version)]);
    return {
      name,
      versions: [...versions]
        .sort((a, b) => b - a)
        .map((version) => {
          const tasks = unfinished.find((entry) => entry.version === version);
          return {
            version,
            registeredHere: registered.includes(version),
            pending: tasks?.pending ?? 0,
            running: tasks?.running ?? 0,
            held: tasks?.held ?? 0,
            workers: tasks?.workers ?? [],
          };
        }),
      steps,
      limits,
      schedules: schedules.filter((schedule) => schedule.workflow === name),
      subscriptions,
    };
  }
}
