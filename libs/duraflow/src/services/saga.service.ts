import { Injectable } from '@nestjs/common';
import { DeadLetter } from '../entities/dead-letter.entity';
import { InvalidListOptionsError } from '../errors';
import { DeadLetterStore } from '../persistence/dead-letter.store';

export interface ListDeadLettersOptions {
  taskId?: string;
  /** 1..1000, default 50. */
  limit?: number;
}

/** Saga rollback and the dead-letter queue of compensations that failed for good. */
@Injectable()
export class SagaService {
  constructor(private readonly deadLetters: DeadLetterStore) {}

  /** Dead letters, newest first. */
  async listDeadLetters(options: ListDeadLettersOptions = {}): Promise<DeadLetter[]> {
    const limit = options.limit ?? 50;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) {
      throw new InvalidListOptionsError('limit', `must be an integer from 1 to 1000, got ${String(limit)}.`);
    }
    return this.deadLetters.listDeadLetters({ taskId: options.taskId, limit });
  }
}
