import { Inject, Injectable } from '@nestjs/common';
import { DURAFLOW_CLOCK, DuraflowClock } from '../domain/engine-clock';
import { ScheduleInfo } from '../domain/schedule-options';
import { ScheduleRegistry } from './schedule.registry';
import { ScheduleStore } from './schedule.store';

/**
 * The schedules as `listSchedules` shows them: the definitions of this process, the state of the
 * database, and the next tick after now on the engine's clock (the one the ticker ticks by).
 */
@Injectable()
export class ScheduleReader {
  constructor(
    private readonly registry: ScheduleRegistry,
    private readonly store: ScheduleStore,
    @Inject(DURAFLOW_CLOCK) private readonly clock: DuraflowClock,
  ) {}

  async list(): Promise<ScheduleInfo[]> {
    const schedules = this.registry.all();
    if (!schedules.length) return [];
    const states = await this.store.readStates(schedules.map((schedule) => schedule.name));
    const now = new Date(this.clock.now());
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
