import { Injectable } from '@nestjs/common';
import { CronSchedule } from './cron-schedule';
import { ScheduleCatchUp } from '../domain/schedule-options';

/** A schedule as the ticker runs it: checked at boot, its input already validated and serialized. */
export interface RegisteredSchedule {
  name: string;
  workflow: string;
  cron: CronSchedule;
  catchUp: ScheduleCatchUp;
  maxCatchUp: number;
  /** The input every tick submits, as the workflow's checks left it (JSON). */
  inputJson: string;
  /** The tasks' `max_retries`: the workflow's, else the module's. */
  maxRetries: number;
  /** The version the tasks start on: the newest this process registers (null when it declares none). */
  workflowVersion: number | null;
  /** Flow control's key of the input (null for a workflow without limits). */
  concurrencyKey: string | null;
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
