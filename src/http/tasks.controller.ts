import { Body, Controller, Get, HttpCode, HttpStatus, Param, Post, Query, Res } from '@nestjs/common';
import {
  AgentTask,
  ForkResult,
  InvalidListOptionsError,
  parseTagPairs,
  SignalNotFoundError,
  RunLogPage,
  SignalReceipt,
  StepRun,
  TaskNotFoundError,
  TaskPage,
  TaskSignal,
  WorkflowService,
} from '@duraflow/nestjs';
import { ForkTaskDto } from './operate-tasks.dto';
import { SubmitTaskDto } from './submit-task.dto';
import { CancelTaskDto, GetLogsQuery, ListSignalsQuery, ListTasksQuery, SignalTaskDto } from './task-queries.dto';
import { uuidParam } from './uuid-param.pipe';

@Controller('tasks')
export class TasksController {
  constructor(private readonly workflows: WorkflowService) {}

  /** 201 with a new task; 200 with the task an earlier submit made under the same idempotency key and input. */
  @Post()
  async submit(@Body() body: SubmitTaskDto, @Res({ passthrough: true }) response: { status(code: number): unknown }): Promise<AgentTask> {
    const { task, created } = await this.workflows.submitWithResult(body.workflowName, body.input, {
      priority: body.priority,
      scheduledAt: body.scheduledAt,
      maxRetries: body.maxRetries,
      idempotencyKey: body.idempotencyKey,
      version: body.version,
      tags: body.tags,
    });
    response.status(created ? HttpStatus.CREATED : HttpStatus.OK);
    return task;
  }

  @Get()
  list(@Query() query: ListTasksQuery): Promise<TaskPage> {
    const { tag, ...rest } = query;
    const pairs = tag === undefined ? [] : Array.isArray(tag) ? tag : [tag];
    return this.workflows.list({ ...rest, tags: parseTagPairs(pairs, (reason) => new InvalidListOptionsError('tag', reason)) });
  }

  /** The task, with the ids of the children it started (`ctx.startChild` / `ctx.runChild`), oldest first. */
  @Get(':id')
  async get(@Param('id', uuidParam('id')) id: string): Promise<AgentTask & { childTaskIds: string[] }> {
    const task = await this.findTask(id);
    const children = await this.workflows.getChildren(id);
    return Object.assign(task, { childTaskIds: children.map((child) => child.id) });
  }

  @Get(':id/steps')
  async steps(@Param('id', uuidParam('id')) id: string): Promise<StepRun[]> {
    await this.findTask(id);
    return this.workflows.getSteps(id);
  }

  /** `compensate: true` in the body or the query also undoes the steps that completed. */
  @Post(':id/cancel')
  @HttpCode(HttpStatus.OK)
  cancel(@Param('id', uuidParam('id')) id: string, @Body() body: CancelTaskDto, @Query() query: CancelTaskDto): Promise<AgentTask> {
    return this.workflows.cancel(id, { compensate: body.compensate ?? query.compensate ?? false });
  }

  /** A task the determinism guard holds runs again, on the code deployed now; 409 TASK_NOT_HELD for any other. */
  @Post(':id/resume')
  @HttpCode(HttpStatus.OK)
  resume(@Param('id', uuidParam('id')) id: string): Promise<AgentTask> {
    return this.workflows.resume(id);
  }

  /**
   * A failed task (or a cancelled one whose steps were not compensated) runs again from where it
   * stopped: 200 with the task; 409 TASK_NOT_RETRYABLE for a task in any other status.
   */
  @Post(':id/retry')
  @HttpCode(HttpStatus.OK)
  retry(@Param('id', uuidParam('id')) id: string): Promise<AgentTask> {
    return this.workflows.retry(id);
  }

  /**
   * 201 with a new task that copies the steps the task recorded before `fromStep` (never run) and
   * runs `fromStep` and what follows anew, on `input` and `version` (default: the original's); its
   * `forkedFrom` names the original and the step, `copiedSteps` counts what was copied. 404
   * FORK_STEP_UNKNOWN for a step the original never recorded.
   */
  @Post(':id/fork')
  fork(@Param('id', uuidParam('id')) id: string, @Body() body: ForkTaskDto): Promise<ForkResult> {
    return this.workflows.fork(id, { fromStep: body.fromStep, input: body.input, version: body.version });
  }

  /**
   * Sends signal `name` (its payload in the body's `payload`): kept until the task's
   * `ctx.waitForSignal(name)` takes it. 404 for an unknown task, 409 for a finished one, 400 for
   * a bad name or a payload that is not JSON, 413 for one over the input limit.
   */
  @Post(':id/signals/:name')
  signal(@Param('id', uuidParam('id')) id: string, @Param('name') name: string, @Body() body: SignalTaskDto): Promise<SignalReceipt> {
    return this.workflows.signal(id, name, body?.payload);
  }

  /**
   * One page of the signals sent to the task (`?limit=&after=&maxPayloadBytes=`), in the order they
   * were sent, with the wait that took each: the body is the page's array (as it was before pages),
   * the next page's cursor is in `X-Next-Cursor` and `Link: <…>; rel="next"` (absent on the last
   * page). A payload over `maxPayloadBytes` (default 64 KiB) is left out (`payloadOmitted`, with its
   * size and preview): `GET /tasks/:id/signals/:signalId` has it whole.
   */
  @Get(':id/signals')
  async signals(
    @Param('id', uuidParam('id')) id: string,
    @Query() query: ListSignalsQuery,
    @Res({ passthrough: true }) response: { setHeader(name: string, value: string): unknown },
  ): Promise<TaskSignal[]> {
    await this.findTask(id);
    const page = await this.workflows.listSignals(id, query);
    if (page.nextCursor) {
      const next = new URLSearchParams({ after: page.nextCursor });
      if (query.limit !== undefined) next.set('limit', String(query.limit));
      if (query.maxPayloadBytes !== undefined) next.set('maxPayloadBytes', String(query.maxPayloadBytes));
      response.setHeader('X-Next-Cursor', page.nextCursor);
      response.setHeader('Link', `<?${next.toString()}>; rel="next"`);
    }
    return page.items;
  }

  /**
   * One page of the lines the run kept with `ctx.log` (`?afterSeq=&limit=`), in order, each with
   * its step key and attempt: `{ items, nextAfterSeq }` (null on the last page). 404 for no task.
   */
  @Get(':id/logs')
  async logs(@Param('id', uuidParam('id')) id: string, @Query() query: GetLogsQuery): Promise<RunLogPage> {
    await this.findTask(id);
    return this.workflows.getLogs(id, query);
  }

  /** One signal with its whole payload; 404 when the task has no signal of this id. */
  @Get(':id/signals/:signalId')
  async getSignal(@Param('id', uuidParam('id')) id: string, @Param('signalId') signalId: string): Promise<TaskSignal> {
    const signal = await this.workflows.getSignal(id, signalId);
    if (!signal) throw new SignalNotFoundError(id, signalId);
    return signal;
  }

  /** The tasks the task started with ctx.startChild / ctx.runChild (each names its parent in `parentTaskId`). */
  @Get(':id/children')
  async children(@Param('id', uuidParam('id')) id: string): Promise<AgentTask[]> {
    await this.findTask(id);
    return this.workflows.getChildren(id);
  }

  private async findTask(id: string): Promise<AgentTask> {
    const task = await this.workflows.get(id);
    if (!task) throw new TaskNotFoundError(id); // DuraflowExceptionFilter answers 404, as for every library error
    return task;
  }
}
