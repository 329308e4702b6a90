import { Controller, Get, Headers, MessageEvent, Param, Query, Sse } from '@nestjs/common';
import { Type } from 'class-transformer';
import { IsInt, IsOptional, Max, Min } from 'class-validator';
import { Observable } from 'rxjs';
import { streamEvents, TaskNotFoundError, WorkflowService } from '@duraflow/nestjs';
import { uuidParam } from './uuid-param.pipe';

/** The longest `?waitMs=` of `GET /tasks/:id/events/:key`: a caller that must wait longer asks again. */
export const MAX_EVENT_WAIT_MS = 60_000;

/** Query of `GET /tasks/:id/events/:key`. */
export class GetEventQuery {
  /** How long to wait for the run to set the event, 0 (the default: answer now) to 60,000 ms. */
  @IsOptional()
  @Type(() => Number)
  @Max(MAX_EVENT_WAIT_MS)
  @Min(0)
  @IsInt()
  waitMs?: number;
}

/** Query of `GET /tasks/:id/streams/:key`. */
export class ReadStreamQuery {
  /** Start after this seq when the request has no Last-Event-ID. Default 0: from the first chunk. */
  @IsOptional()
  @Type(() => Number)
  @Min(0)
  @IsInt()
  after?: number;
}

/** What runs tell: their events (`ctx.setEvent`) and streams (`ctx.writeStream`), as HTTP and Server-Sent Events. */
@Controller('tasks')
export class TaskTalkController {
  constructor(private readonly workflows: WorkflowService) {}

  /** `{ key, value }` once the run has set the event, waiting up to `waitMs`; 408 EVENT_TIMEOUT past it, 404 for no task. */
  @Get(':id/events/:key')
  async getEvent(
    @Param('id', uuidParam('id')) id: string,
    @Param('key') key: string,
    @Query() query: GetEventQuery,
  ): Promise<{ key: string; value: unknown }> {
    const value = await this.workflows.getEvent(id, key, { timeoutMs: query.waitMs ?? 0 });
    return { key, value };
  }

  /**
   * The stream as text/event-stream: `id:` the seq, `data:` the chunk as JSON, from the chunk after
   * Last-Event-ID (or `?after=`), live while the run writes; an `end` event at the close (or when the
   * task ends), then the response ends. 404 for no task (before any event).
   */
  @Sse(':id/streams/:key')
  async readStream(
    @Param('id', uuidParam('id')) id: string,
    @Param('key') key: string,
    @Query() query: ReadStreamQuery,
    @Headers('last-event-id') lastEventId?: string,
  ): Promise<Observable<MessageEvent>> {
    if (!(await this.workflows.get(id))) throw new TaskNotFoundError(id);
    return streamEvents(this.workflows, id, key, { lastEventId, after: query.after });
  }
}
