import { Controller, Get, HttpCode, HttpStatus, Param, Post, Query, UseFilters } from '@nestjs/common';
import { SagaService } from '@duraflow/nestjs';
import { DuraflowExceptionFilter } from './duraflow-exception.filter';
import { ListDeadLettersQuery } from './task-queries.dto';
import { uuidParam } from './uuid-param.pipe';

@Controller('dead-letters')
@UseFilters(DuraflowExceptionFilter)
export class DeadLettersController {
  constructor(private readonly saga: SagaService) {}

  /** Compensations that failed for good, newest first: `{ items, nextCursor }`. */
  @Get()
  list(@Query() query: ListDeadLettersQuery) {
    return this.saga.listDeadLetters(query);
  }

  /** Runs the compensation again: `{ outcome: 'compensated' | 'failed', task, deadLetter }`. */
  @Post(':id/retry')
  @HttpCode(HttpStatus.OK)
  retry(@Param('id', uuidParam('id')) id: string) {
    return this.saga.retryDeadLetter(id);
  }
}
