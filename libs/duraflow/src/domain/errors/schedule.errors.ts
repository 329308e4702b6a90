import { DuraflowError } from './duraflow.error';

/** Boot-time: a schedule's cron expression does not parse, or never ticks. */
export class InvalidScheduleCronError extends DuraflowError {
  readonly code = 'INVALID_SCHEDULE_CRON';
  constructor(
    readonly scheduleName: string,
    readonly cron: unknown,
    reason: string,
  ) {
    super(
      `Schedule "${scheduleName}" has the cron ${JSON.stringify(cron) ?? String(cron)}, which ${reason}. ` +
        `Use 5 fields (minute hour day-of-month month day-of-week, e.g. "0 2 * * *") or 6 with a leading seconds field.`,
    );
  }
}

/** Boot-time: a schedule's time zone is not an IANA zone this Node.js knows. */
export class UnknownScheduleTimezoneError extends DuraflowError {
  readonly code = 'UNKNOWN_SCHEDULE_TIMEZONE';
  constructor(
    readonly scheduleName: string,
    readonly timezone: unknown,
  ) {
    super(
      `Schedule "${scheduleName}" has the time zone ${JSON.stringify(timezone) ?? String(timezone)}, which is not an IANA time zone ` +
        `known to this Node.js. Use a name such as "Europe/Amsterdam" or "America/New_York", or omit it for UTC.`,
    );
  }
}

/** Boot-time: a schedule names a workflow this application does not register. */
export class UnknownScheduleWorkflowError extends DuraflowError {
  readonly code = 'UNKNOWN_SCHEDULE_WORKFLOW';
  constructor(
    readonly scheduleName: string,
    readonly workflowName: unknown,
    known: string[],
  ) {
    super(
      `Schedule "${scheduleName}" starts the workflow ${JSON.stringify(workflowName) ?? String(workflowName)}, which this application ` +
        `does not register (registered: ${known.length ? known.map((name) => `"${name}"`).join(', ') : 'none'}). ` +
        `Fix the schedule's "workflow", or register that workflow in this application.`,
    );
  }
}

/** Boot-time: two schedules (a workflow's own and one in `forRoot({ schedules })`, or two there) share a name. */
export class DuplicateScheduleError extends DuraflowError {
  readonly code = 'DUPLICATE_SCHEDULE';
  constructor(
    readonly scheduleName: string,
    first: string,
    second: string,
  ) {
    super(
      `Schedule "${scheduleName}" is defined twice (${first} and ${second}). Schedule names must be unique in the application ` +
        `(a workflow's own schedule is named after the workflow): rename one in forRoot({ schedules }).`,
    );
  }
}

/** Boot-time: a schedule's input fails its workflow's checks (its DTO, JSON, size). */
export class InvalidScheduleInputError extends DuraflowError {
  readonly code = 'INVALID_SCHEDULE_INPUT';
  constructor(
    readonly scheduleName: string,
    readonly workflowName: string,
    /** The error the submit's checks threw (InputValidationError, NotSerializableError, InputTooLargeError). */
    override readonly cause: Error,
  ) {
    super(
      `Schedule "${scheduleName}" would submit an input that workflow "${workflowName}" refuses: ${cause.message} Fix the schedule's "input".`,
    );
  }
}

/** Boot-time: a schedule's other options (name, catchUp, maxCatchUp, its shape) are malformed. */
export class InvalidScheduleError extends DuraflowError {
  readonly code = 'INVALID_SCHEDULE';
  constructor(
    readonly scheduleName: string | undefined,
    reason: string,
  ) {
    super(`Invalid schedule${scheduleName ? ` "${scheduleName}"` : ''}: ${reason}`);
  }
}

/** pauseSchedule / resumeSchedule / triggerSchedule (and the dashboard's buttons): no schedule of that name here. */
export class UnknownScheduleError extends DuraflowError {
  readonly code = 'UNKNOWN_SCHEDULE';
  constructor(readonly scheduleName: string) {
    super(
      `This application defines no schedule named ${JSON.stringify(scheduleName)}: check the name against listSchedules() ` +
        `(a schedule is defined by @Workflow(name, { schedule }) or forRoot({ schedules }) on the node that acts on it).`,
    );
  }
}
