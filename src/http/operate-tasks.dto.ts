import { Transform, Type } from 'class-transformer';
import { IsBoolean, IsDateString, IsEnum, IsInt, IsNotEmpty, IsObject, IsOptional, IsString, MaxLength, Min } from 'class-validator';
import { TaskStatus } from '@duraflow/nestjs';

/** Body of `POST /tasks/:id/fork`. Each property's type check is its last decorator: class-validator runs them bottom-up. */
export class ForkTaskDto {
  /** The step the new task runs anew (with every step after it); the steps recorded before it are copied. */
  @MaxLength(255)
  @IsNotEmpty()
  @IsString()
  fromStep: string;

  /** The new task's input (checked against the workflow's DTO); absent: the original's. */
  @IsOptional()
  input?: unknown;

  /** The workflow version the new task runs; absent: the original's. */
  @IsOptional()
  @Min(1)
  @IsInt()
  version?: number;
}

/** One status or a list of them (`"failed"` or `["failed", "cancelled"]`). */
const toStatusList = ({ value }: { value: unknown }) => (typeof value === 'string' ? [value] : value);

/**
 * Body of the bulk actions `POST /tasks/cancel`, `/tasks/retry` and `/tasks/resume`: the filter of
 * `GET /tasks` (`workflowName`, `status`) with the version and a creation window, and how far to go.
 */
export class BulkTasksDto {
  @IsOptional()
  @MaxLength(255)
  @IsString()
  workflowName?: string;

  /** One status or several; the action still changes only the tasks it can (a retry: failed or cancelled ones). */
  @IsOptional()
  @Transform(toStatusList)
  @IsEnum(TaskStatus, { each: true, message: `status must be one or a list of ${Object.values(TaskStatus).join(', ')}` })
  status?: TaskStatus[];

  @IsOptional()
  @Min(1)
  @IsInt()
  version?: number;

  /** Created before this time (ISO-8601). */
  @IsOptional()
  @IsDateString({}, { message: 'createdBefore must be an ISO-8601 date string' })
  createdBefore?: string;

  /** Created at or after this time (ISO-8601). */
  @IsOptional()
  @IsDateString({}, { message: 'createdAfter must be an ISO-8601 date string' })
  createdAfter?: string;

  /** Only tasks holding every one of these tags, `{ "tenant": "acme" }` (the library checks them). */
  @IsOptional()
  @IsObject()
  tags?: Record<string, string>;

  /** Every task, when the filter is empty on purpose (an empty filter is refused without it). */
  @IsOptional()
  @IsBoolean()
  all?: boolean;

  /** Change at most this many tasks. */
  @IsOptional()
  @Type(() => Number)
  @Min(1)
  @IsInt()
  limit?: number;

  /** Only count the tasks it would change (`matched`); change nothing. */
  @IsOptional()
  @IsBoolean()
  dryRun?: boolean;
}

/** Body of `POST /tasks/cancel`: the bulk filter, and whether to undo the completed steps of each task. */
export class BulkCancelTasksDto extends BulkTasksDto {
  @IsOptional()
  @IsBoolean()
  compensate?: boolean;
}
