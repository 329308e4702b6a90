import { Injectable } from '@nestjs/common';
import { AgentTask } from '../domain/entities/agent-task.entity';
import { UnknownScheduleError } from '../domain/errors';
import { TaskFactory } from '../execution/task-factory';
import { RegisteredSchedule, ScheduleRegistry } from './schedule.registry';
import { ScheduleStore } from './schedule.store';

/**
 * An operator's hands on a schedule (WorkflowService.pauseSchedule / resumeSchedule /
 * triggerSchedule, the dashboard's buttons). Pause is durable and shared: `paused_at` on the
 * schedule's row, which every node's tick reads in its own transaction (ScheduleStore.startTick),
 * so a paused schedule starts no task on any node, and its ticks meanwhile count as done (no
 * catch-up after a resume). Trigger starts the schedule's task now, outside its ticks.
 */
@Injectable()
export class ScheduleControl {
  constructor(
    private readonly registry: ScheduleRegistry,
    private readonly store: ScheduleStore,
    private readonly factory: TaskFactory,
  ) {}

  /** Stops its ticks on every node until resumed (a pause of a paused schedule keeps its first time). */
  async pause(name: string): Promise<void> {
    await this.setPaused(this.defined(name), true);
  }

  async resume(name: string): Promise<void> {
    await this.setPaused(this.defined(name), false);
  }

  /** The schedule's task, started now (paused or not); its ticks go on as before. */
  async trigger(name: string): Promise<AgentTask> {
    const schedule = this.defined(name);
    const { task } = await this.factory.create({ ...schedule.task, idempotencyKey: null });
    return task;
  }

  private defined(name: string): RegisteredSchedule {
    const schedule = typeof name === 'string' ? this.registry.find(name) : undefined;
    if (!schedule) throw new UnknownScheduleError(String(name));
    return schedule;
  }

  private async setPaused(schedule: RegisteredSchedule, paused: boolean): Promise<void> {
    // The row exists once a node has started its ticker; written here too, for a node that has not.
    await this.store.saveDefinitions([schedule]);
    await this.store.setPaused(schedule.name, paused);
  }
}
