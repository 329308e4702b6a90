import { Body, Controller, Get, HttpStatus, Param, Post, Query, Res } from '@nestjs/common';
import { IsNotEmpty, IsOptional, IsString, MaxLength } from 'class-validator';
import {
  ListEventsOptions,
  MAX_IDEMPOTENCY_KEY_LENGTH,
  OpenEventGroup,
  PublishedEventInfo,
  PublishResult,
  WorkflowService,
} from '@duraflow/nestjs';

/** Body of `POST /events/:name`. */
export class PublishEventDto {
  /** The event's payload: the input of the tasks it starts; default `{}`. */
  @IsOptional()
  payload?: unknown;

  @IsOptional()
  @MaxLength(MAX_IDEMPOTENCY_KEY_LENGTH)
  @IsNotEmpty()
  @IsString()
  idempotencyKey?: string;
}

/** Events that start workflows (docs/events.md): publish one, list the recent ones and the open debounces and batches. */
@Controller('events')
export class EventsController {
  constructor(private readonly workflows: WorkflowService) {}

  /** 201 with the event and what it started per subscribing workflow; 200 with the event an earlier publish recorded under the same key. */
  @Post(':name')
  async publish(
    @Param('name') name: string,
    @Body() body: PublishEventDto,
    @Res({ passthrough: true }) response: { status(code: number): unknown },
  ): Promise<PublishResult> {
    const result = await this.workflows.publish(name, body?.payload, { idempotencyKey: body?.idempotencyKey });
    response.status(result.created ? HttpStatus.CREATED : HttpStatus.OK);
    return result;
  }

  /** The recent events, newest first (`?name=&limit=`), each with its deliveries. */
  @Get()
  list(@Query('name') name?: string, @Query('limit') limit?: string): Promise<PublishedEventInfo[]> {
    const options: ListEventsOptions = { name: name || undefined, limit: limit === undefined ? undefined : Number(limit) };
    return this.workflows.listEvents(options);
  }

  /** The debounces and batches whose task has not started yet. */
  @Get('groups/open')
  openGroups(): Promise<OpenEventGroup[]> {
    return this.workflows.listEventGroups();
  }
}
