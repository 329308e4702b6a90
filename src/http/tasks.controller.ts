import { Body, Controller, Get, NotFoundException, Param, ParseUUIDPipe, Post, Query } from '@nestjs/common';
import { TaskStatus, WorkflowService } from '@duraflow/nestjs';
import { SubmitTaskDto } from './submit-task.dto';

@Controller('tasks')
export class TasksController {
  constructor(private readonly workflows: WorkflowService) {}

  @Post()
  submit(@Body() body: SubmitTaskDto) {
    return this.workflows.submit(body.workflowName, body.input, {
      priority: body.priority,
      scheduledAt: body.scheduledAt,
      maxRetries: body.maxRetries,
      idempotencyKey: body.idempotencyKey,
    });
  }

  @Get()
  list(
    @Query('status') status?: TaskStatus,
    @Query('workflowName') workflowName?: string,
    @Query('limit') limit?: string,
    @Query('cursor') cursor?: string,
  ) {
    return this.workflows.list({ status, workflowName, limit: limit === undefined ? undefined : Number(limit), cursor });
  }

  @Get(':id')
  async get(@Param('id', ParseUUIDPipe) id: string) {
    const task = await this.workflows.get(id);
    if (!task) throw new NotFoundException(`No task with id "${id}"`);
    return task;
  }

  @Get(':id/steps')
  async steps(@Param('id', ParseUUIDPipe) id: string) {
    if (!(await this.workflows.get(id))) throw new NotFoundException(`No task with id "${id}"`);
    return this.workflows.getSteps(id);
  }

  @Post(':id/cancel')
  cancel(@Param('id', ParseUUIDPipe) id: string) {
    return this.workflows.cancel(id);
  }
}
