import { Controller, Get, HttpCode, HttpStatus, Param, Post, Query } from '@nestjs/common';
import { AgentTask, DeadLetterRetryResult, SagaService } from '@duraflow/nestjs';
import { ListDeadLettersQuery } from './task-queries.dto';
import { uuidParam } from './uuid-param.pipe';

@Controller('dead-letters')
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
  retry(@Param('id', uuidParam('id')) id: string): Promise<DeadLetterRetryResult> {
    return this.saga.retryDeadLetter(id);
  }

  /** Removes the entry without running its compensation (its effect was undone by hand): `{ task }`. */
  @Post(':id/discard')
  @HttpCode(HttpStatus.OK)
  async discard(@Param('id', uuidParam('id')) id: string): Promise<{ task: AgentTask | null }> {
    return { task: await this.saga.discardDeadLetter(id) };
  }
}
