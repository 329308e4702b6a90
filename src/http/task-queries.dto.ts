import { Transform, Type } from 'class-transformer';
import { IsBoolean, IsEnum, IsInt, IsOptional, IsString, IsUUID, Max, Min } from 'class-validator';
import { MAX_LIST_LIMIT, TaskStatus } from '@duraflow/nestjs';

/** A query-string boolean: "true" / "false" (a plain cast would read "false" as true). */
const toBoolean = ({ value }: { value: unknown }) => (value === 'true' ? true : value === 'false' ? false : value);

/**
 * `limit` of a page: 1..MAX_LIST_LIMIT, the library's default when unset. (class-validator
 * checks a property's decorators bottom-up and the pipe stops at the first failure: the type
 * check goes last.)
 */
class LimitQuery {
  @IsOptional()
  @Type(() => Number)
  @Max(MAX_LIST_LIMIT)
  @Min(1)
  @IsInt()
  limit?: number;
}

/** A page of a list read by cursor: `limit` and the `cursor` to go on from. */
class PageQuery extends LimitQuery {
  /** `nextCursor` of the previous page. */
  @IsOptional()
  @IsString()
  cursor?: string;
}

/** Query of `GET /tasks`. */
export class ListTasksQuery extends PageQuery {
  @IsOptional()
  @IsEnum(TaskStatus, { message: `status must be one of ${Object.values(TaskStatus).join(', ')}` })
  status?: TaskStatus;

  @IsOptional()
  @IsString()
  workflowName?: string;

  /** `?tag=tenant:acme&tag=region:eu`: only tasks holding every one of these tags. */
  @IsOptional()
  @IsString({ each: true, message: 'tag must be key:value, such as tag=tenant:acme' })
  tag?: string | string[];
}

/** Query of `GET /tasks/:id/signals`: a page in the order they were sent. */
export class ListSignalsQuery extends LimitQuery {
  /** The `X-Next-Cursor` of the previous page. */
  @IsOptional()
  @IsString()
  after?: string;

  /** A payload larger than this (bytes of JSON) is left out, with `payloadOmitted`; the library checks the range. */
  @IsOptional()
  @Type(() => Number)
  @Min(0)
  @IsInt()
  maxPayloadBytes?: number;
}

/** Query of `GET /tasks/:id/logs`: the run's log lines after `afterSeq`, in order. */
export class GetLogsQuery extends LimitQuery {
  /** The `nextAfterSeq` of the previous page (0 or left out: from the first line). */
  @IsOptional()
  @Type(() => Number)
  @Min(0)
  @IsInt()
  afterSeq?: number;
}

/** Query of `GET /dead-letters`. */
export class ListDeadLettersQuery extends PageQuery {
  @IsOptional()
  @IsUUID()
  taskId?: string;
}

/** Body or query of `POST /tasks/:id/cancel`. */
export class CancelTaskDto {
  /** Also undo the steps that completed (their compensations run, newest first). */
  @IsOptional()
  @Transform(toBoolean)
  @IsBoolean()
  compensate?: boolean;
}

/** Body of `POST /tasks/:id/signals/:name`. */
export class SignalTaskDto {
  /** The signal's payload (any JSON; `ctx.waitForSignal` resolves with it); absent means none. */
  @IsOptional()
  payload?: unknown;
}
