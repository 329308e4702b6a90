import { Injectable } from '@nestjs/common';
import { CronSchedule } from './cron-schedule';
import { ScheduleCatchUp } from '../domain/schedule-options';
import { NewTask } from '../persistence/lifecycle/create-tasks';

/** A schedule as the ticker runs it: checked at boot, its input already validated and serialized. */
export interface RegisteredSchedule {
  name: string;
  workflow: string;
  cron: CronSchedule;
  catchUp: ScheduleCatchUp;
  maxCatchUp: number;
  /**
   * The task every tick creates, as the task factory prepared it at boot (its input checked by
   * the workflow's DTO, its version the newest this process registers); each tick adds its own
   * idempotency key.
   */
  task: NewTask;
  /** Where it was defined, for messages: `@Workflow("report")`, `forRoot({ schedules })[0]`. */
  source: string;
}

/** Every schedule this process defines, filled at boot by the ScheduleExplorer. */
@Injectable()
export class ScheduleRegistry {
  private readonly schedules = new Map<string, RegisteredSchedule>();

  register(schedule: RegisteredSchedule): void {
    this.schedules.set(schedule.name, schedule);
  }

  find(name: string): RegisteredSchedule | undefined {
    return this.schedules.get(name);
  }

  all(): RegisteredSchedule[] {
    return [...this.schedules.values()];
  }
}
