import { Injectable } from '@nestjs/common';
import { ScheduleInfo } from '../domain/schedule-options';
import { ScheduleRegistry } from './schedule.registry';
import { ScheduleStore } from './schedule.store';

/** The schedules as `listSchedules` shows them: the definitions of this process, the state of the database. */
@Injectable()
export class ScheduleReader {
  constructor(
    private readonly registry: ScheduleRegistry,
    private readonly store: ScheduleStore,
  ) {}

  async list(): Promise<ScheduleInfo[]> {
    const schedules = this.registry.all();
    if (!schedules.length) return [];
    const states = await this.store.readStates(schedules.map((schedule) => schedule.name));
    const now = new Date();
    return schedules
      .map((schedule) => {
        const state = states.get(schedule.name);
        return {
          name: schedule.name,
          workflow: schedule.workflow,
          cron: schedule.cron.expression,
          timezone: schedule.cron.timezone,
          catchUp: schedule.catchUp,
          maxCatchUp: schedule.maxCatchUp,
          nextTickAt: schedule.cron.nextAfter(now),
          lastTickAt: state?.lastTickAt ?? null,
          lastTask: state?.lastTask ?? null,
          pausedAt: state?.pausedAt ?? null,
        };
      })
      .sort((a, b) => a.name.localeCompare(b.name));
  }
}
