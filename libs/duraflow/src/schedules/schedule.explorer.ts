import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { WorkflowMetadataAccessor } from '../discovery/workflow-metadata.accessor';
import { RegisteredWorkflow, WorkflowRegistry } from '../discovery/workflow.registry';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { DURAFLOW_MODULE_OPTIONS } from '../config/duraflow.module-definition';
import { DuraflowModuleOptions } from '../config/duraflow.options';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import {
  DuplicateScheduleError,
  DuraflowError,
  InvalidScheduleCronError,
  InvalidScheduleError,
  InvalidScheduleInputError,
  UnknownScheduleTimezoneError,
  UnknownScheduleWorkflowError,
} from '../domain/errors';
import { CronSchedule, isKnownTimezone } from './cron-schedule';
import {
  DEFAULT_MAX_CATCH_UP,
  MAX_CATCH_UP,
  SCHEDULE_CATCH_UP_POLICIES,
  SCHEDULE_NAME_PATTERN,
  ScheduleDefinition,
  WorkflowScheduleOptions,
} from '../domain/schedule-options';
import { RegisteredSchedule, ScheduleRegistry } from './schedule.registry';
import { TaskFactory } from '../execution/task-factory';
import { NewTask } from '../persistence/lifecycle/create-tasks';
import { findWorkflowProviders } from '../discovery/workflow-providers';

interface FoundSchedule {
  definition: ScheduleDefinition;
  source: string;
}

/**
 * Finds the schedules at module init (a workflow's own `schedule`, decorated or functional, and
 * `forRoot({ schedules })`), checks each and registers it. Any mistake stops the boot with a
 * typed error saying what to fix, before anything is written. Runs after the WorkflowExplorer
 * (it is listed after it in the module), since a schedule names a registered workflow.
 */
@Injectable()
export class ScheduleExplorer implements OnModuleInit {
  private readonly logger = new Logger('Duraflow');

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly metadata: WorkflowMetadataAccessor,
    private readonly workflows: WorkflowRegistry,
    private readonly registry: ScheduleRegistry,
    private readonly factory: TaskFactory,
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    @Inject(DURAFLOW_MODULE_OPTIONS) private readonly moduleOptions: DuraflowModuleOptions,
  ) {}

  async onModuleInit(): Promise<void> {
    const found = this.findSchedules();
    const checked: RegisteredSchedule[] = [];
    const seen = new Map<string, string>();
    for (const { definition, source } of found) {
      const schedule = await this.check(definition, source);
      const first = seen.get(schedule.name);
      if (first) throw new DuplicateScheduleError(schedule.name, first, source);
      seen.set(schedule.name, source);
      checked.push(schedule);
    }
    for (const schedule of checked) this.registry.register(schedule);
    if (checked.length) {
      this.logger.log(`Registered schedules: ${checked.map((s) => `${s.name} (${s.cron.expression} ${s.cron.timezone})`).join(', ')}`);
    }
  }

  private findSchedules(): FoundSchedule[] {
    const found: FoundSchedule[] = [];
    for (const { metatype, meta } of findWorkflowProviders(this.discovery, this.metadata)) {
      if (meta.options.schedule !== undefined) {
        found.push(this.ownSchedule(meta.name, meta.options.schedule, `@Workflow("${meta.name}") on class ${metatype.name}`));
      }
    }
    for (const definition of this.options.workflows) {
      if (definition.options.schedule !== undefined) {
        found.push(this.ownSchedule(definition.name, definition.options.schedule, `workflow("${definition.name}")`));
      }
    }
    const schedules = this.moduleOptions?.schedules;
    if (schedules !== undefined && !Array.isArray(schedules)) {
      throw new InvalidScheduleError(undefined, 'DuraflowModule option "schedules" must be an array of { name, workflow, cron, ... }.');
    }
    for (const [index, definition] of (schedules ?? []).entries()) {
      if (typeof definition !== 'object' || definition === null) {
        throw new InvalidScheduleError(undefined, `forRoot({ schedules })[${index}] must be an object { name, workflow, cron, ... }.`);
      }
      found.push({ definition, source: `forRoot({ schedules })[${index}]` });
    }
    return found;
  }

  private ownSchedule(workflow: string, schedule: WorkflowScheduleOptions, source: string): FoundSchedule {
    if (typeof schedule !== 'object' || schedule === null) {
      throw new InvalidScheduleError(
        workflow,
        `${source}: "schedule" must be an object { cron, timezone?, input?, catchUp?, maxCatchUp? }.`,
      );
    }
    return { definition: { ...schedule, name: workflow, workflow }, source };
  }

  private async check(definition: ScheduleDefinition, source: string): Promise<RegisteredSchedule> {
    const { name } = definition;
    if (typeof name !== 'string' || !SCHEDULE_NAME_PATTERN.test(name)) {
      throw new InvalidScheduleError(
        undefined,
        `${source} has the name ${JSON.stringify(name) ?? String(name)}; use 1 to 200 letters, digits, "-" or "_".`,
      );
    }
    const timezone = definition.timezone ?? 'UTC';
    if (typeof timezone !== 'string' || !isKnownTimezone(timezone)) throw new UnknownScheduleTimezoneError(name, timezone);
    const cron = this.parseCron(name, definition.cron, timezone);
    const catchUp = definition.catchUp ?? 'latest';
    if (!SCHEDULE_CATCH_UP_POLICIES.includes(catchUp)) {
      throw new InvalidScheduleError(name, `"catchUp" must be 'latest', 'all' or 'none', got ${JSON.stringify(catchUp)}.`);
    }
    const maxCatchUp = definition.maxCatchUp ?? DEFAULT_MAX_CATCH_UP;
    if (!Number.isSafeInteger(maxCatchUp) || maxCatchUp < 1 || maxCatchUp > MAX_CATCH_UP) {
      throw new InvalidScheduleError(name, `"maxCatchUp" must be an integer from 1 to ${MAX_CATCH_UP}, got ${String(maxCatchUp)}.`);
    }
    const workflow = this.findWorkflow(name, definition.workflow);
    let task: NewTask;
    try {
      task = await this.factory.prepare(workflow.name, definition.input, {}, { kind: 'schedule' });
    } catch (error) {
      if (error instanceof DuraflowError) throw new InvalidScheduleInputError(name, workflow.name, error);
      throw error;
    }
    return { name, workflow: workflow.name, cron, catchUp, maxCatchUp, task, source };
  }

  private parseCron(name: string, expression: unknown, timezone: string): CronSchedule {
    if (typeof expression !== 'string' || !expression.trim())
      throw new InvalidScheduleCronError(name, expression, 'is not a cron expression');
    let cron: CronSchedule;
    try {
      cron = new CronSchedule(expression, timezone);
    } catch (error) {
      throw new InvalidScheduleCronError(name, expression, `does not parse (${(error as Error).message})`);
    }
    if (!cron.nextAfter(new Date())) throw new InvalidScheduleCronError(name, expression, 'never ticks from now on');
    return cron;
  }

  private findWorkflow(scheduleName: string, workflowName: unknown): RegisteredWorkflow {
    const names = this.workflows.names();
    if (typeof workflowName !== 'string' || !names.includes(workflowName)) {
      throw new UnknownScheduleWorkflowError(scheduleName, workflowName, names);
    }
    return this.workflows.get(workflowName);
  }
}
