import { Body, Controller, Get, HttpCode, HttpStatus, Param, Post, Query, Res } from '@nestjs/common';
import { AgentTask, SignalReceipt, StepRun, TaskNotFoundError, TaskPage, TaskSignal, WorkflowService } from '@duraflow/nestjs';
import { SubmitTaskDto } from './submit-task.dto';
import { CancelTaskDto, ListTasksQuery, SignalTaskDto } from './task-queries.dto';
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
    });
    response.status(created ? HttpStatus.CREATED : HttpStatus.OK);
    return task;
  }

  @Get()
  list(@Query() query: ListTasksQuery): Promise<TaskPage> {
    return this.workflows.list(query);
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
   * Sends signal `name` (its payload in the body's `payload`): kept until the task's
   * `ctx.waitForSignal(name)` takes it. 404 for an unknown task, 409 for a finished one, 400 for
   * a bad name or a payload that is not JSON, 413 for one over the input limit.
   */
  @Post(':id/signals/:name')
  signal(@Param('id', uuidParam('id')) id: string, @Param('name') name: string, @Body() body: SignalTaskDto): Promise<SignalReceipt> {
    return this.workflows.signal(id, name, body?.payload);
  }

  /** The signals sent to the task, in the order they were sent, with the wait that took each. */
  @Get(':id/signals')
  async signals(@Param('id', uuidParam('id')) id: string): Promise<TaskSignal[]> {
    await this.findTask(id);
    return this.workflows.getSignals(id);
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
