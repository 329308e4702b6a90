import { Body, Controller, HttpCode, HttpStatus, Post } from '@nestjs/common';
import { BulkResult, BulkTaskFilter, WorkflowService } from '@duraflow/nestjs';
import { BulkCancelTasksDto, BulkTasksDto } from './operate-tasks.dto';

/**
 * Actions on every task a filter matches, in bounded batches: `{ matched, changed }`. Their paths
 * have one segment after `/tasks`, where a task's own actions have two (`/tasks/:id/cancel`), and
 * `POST /tasks/:id` is no route: a bulk path can never be read as a task id.
 */
@Controller('tasks')
export class BulkTasksController {
  constructor(private readonly workflows: WorkflowService) {}

  /** Cancels the pending and running tasks the filter matches (`compensate: true` also undoes their completed steps). */
  @Post('cancel')
  @HttpCode(HttpStatus.OK)
  cancel(@Body() body: BulkCancelTasksDto): Promise<BulkResult> {
    return this.workflows.cancelMany(bulkFilter(body), { compensate: body.compensate ?? false, limit: body.limit, dryRun: body.dryRun });
  }

  /** Runs again, from where each stopped, the failed (and cancelled, uncompensated) tasks the filter matches. */
  @Post('retry')
  @HttpCode(HttpStatus.OK)
  retry(@Body() body: BulkTasksDto): Promise<BulkResult> {
    return this.workflows.retryMany(bulkFilter(body), { limit: body.limit, dryRun: body.dryRun });
  }

  /** Resumes the tasks the determinism guard holds that the filter matches. */
  @Post('resume')
  @HttpCode(HttpStatus.OK)
  resume(@Body() body: BulkTasksDto): Promise<BulkResult> {
    return this.workflows.resumeMany(bulkFilter(body), { limit: body.limit, dryRun: body.dryRun });
  }
}

/** The library's filter from the request's (`workflowName` as `GET /tasks` names it). */
export function bulkFilter(body: BulkTasksDto): BulkTaskFilter {
  return {
    workflow: body.workflowName,
    version: body.version,
    status: body.status,
    createdBefore: body.createdBefore,
    createdAfter: body.createdAfter,
    tags: body.tags,
    all: body.all,
  };
}
