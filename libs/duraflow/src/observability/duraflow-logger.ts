import { Logger } from '@nestjs/common';
import { inspect } from 'node:util';

/** What a log line of the library says about the task it concerns; each field only where it has one. */
export interface DuraflowLogFields {
  taskId?: string;
  /** A line about several tasks (a hand-back): their ids. */
  taskIds?: string[];
  workflow?: string;
  stepKey?: string;
  deadLetterId?: string;
  workerId?: string;
  /** A stable error code (`STEP_FAILED`, …) when the line reports one. */
  code?: string;
}

/**
 * One log line: `{ message, taskId, workflow, … }`, the shape JSON loggers take fields from (Nest's
 * ConsoleLogger with `json: true` prints it whole as the line's `message`; nest-winston and
 * nestjs-pino spread its fields into the record). A logger that prints text sees the human
 * message alone: `String()` and `util.inspect` (which Nest's text logger uses) both give it.
 */
export class DuraflowLogRecord {
  readonly message: string;

  constructor(message: string, fields: DuraflowLogFields) {
    this.message = message;
    for (const [key, value] of Object.entries(fields)) {
      if (value !== undefined && value !== null) (this as Record<string, unknown>)[key] = value;
    }
  }

  toString(): string {
    return this.message;
  }

  [inspect.custom](): string {
    return this.message;
  }
}

/**
 * The library's logger (context `Duraflow`): Nest's Logger, so it goes wherever the host sends
 * Nest's logs, with the task's id and workflow attached to every line that concerns a task.
 */
export class DuraflowLogger {
  private readonly logger: Logger;

  constructor(context = 'Duraflow') {
    this.logger = new Logger(context);
  }

  log(message: string, fields: DuraflowLogFields = {}): void {
    this.logger.log(record(message, fields));
  }

  warn(message: string, fields: DuraflowLogFields = {}): void {
    this.logger.warn(record(message, fields));
  }

  error(message: string, fields: DuraflowLogFields = {}): void {
    this.logger.error(record(message, fields));
  }

  debug(message: string, fields: DuraflowLogFields = {}): void {
    this.logger.debug(record(message, fields));
  }
}

/** A line with no field stays a plain string: nothing changes for lines that concern no task. */
function record(message: string, fields: DuraflowLogFields): string | DuraflowLogRecord {
  return Object.values(fields).some((value) => value !== undefined && value !== null) ? new DuraflowLogRecord(message, fields) : message;
}
