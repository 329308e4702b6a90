import { IsDateString, IsInt, IsNotEmpty, IsObject, IsOptional, IsString, Matches, MaxLength, Min } from 'class-validator';
import { MAX_IDEMPOTENCY_KEY_LENGTH, WORKFLOW_NAME_PATTERN } from '@duraflow/nestjs';

/** Body of `POST /tasks`. Each property's type check is its last decorator: class-validator runs them bottom-up. */
export class SubmitTaskDto {
  @Matches(WORKFLOW_NAME_PATTERN, { message: 'workflowName must be 1 to 255 letters, digits, "-" or "_"' })
  @IsString()
  workflowName: string;

  /** The workflow's input (checked against its DTO); default `{}`. */
  @IsOptional()
  input?: unknown;

  @IsOptional()
  @IsInt()
  priority?: number;

  @IsOptional()
  @IsDateString({}, { message: 'scheduledAt must be an ISO-8601 date string' })
  scheduledAt?: string;

  @IsOptional()
  @Min(0)
  @IsInt()
  maxRetries?: number;

  @IsOptional()
  @MaxLength(MAX_IDEMPOTENCY_KEY_LENGTH)
  @IsNotEmpty()
  @IsString()
  idempotencyKey?: string;

  /** The workflow version to start; default: the newest the engine registers. */
  @IsOptional()
  @Min(1)
  @IsInt()
  version?: number;

  /** The task's tags, `{ "tenant": "acme" }`: string keys and values (the library checks their count and lengths). */
  @IsOptional()
  @IsObject()
  tags?: Record<string, string>;
}
