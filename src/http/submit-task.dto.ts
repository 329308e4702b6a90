import { IsDateString, IsInt, IsNotEmpty, IsOptional, IsString, Matches, MaxLength, Min } from 'class-validator';

export class SubmitTaskDto {
  @IsString()
  @Matches(/^[A-Za-z0-9_-]{1,255}$/, { message: 'workflowName must be 1 to 255 letters, digits, "-" or "_"' })
  workflowName: string;

  @IsOptional()
  input?: unknown;

  @IsOptional()
  @IsInt()
  priority?: number;

  @IsOptional()
  @IsDateString()
  scheduledAt?: string;

  @IsOptional()
  @IsInt()
  @Min(0)
  maxRetries?: number;

  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  idempotencyKey?: string;
}
