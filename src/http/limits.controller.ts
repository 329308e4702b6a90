import { Controller, Get } from '@nestjs/common';
import { FlowLimitStats, WorkerService } from '@duraflow/nestjs';

@Controller('limits')
export class LimitsController {
  constructor(private readonly worker: WorkerService) {}

  /** What waits on which flow limit (concurrency, per-key concurrency, rate limit), read now. */
  @Get()
  async list(): Promise<{ limits: FlowLimitStats[] }> {
    return { limits: await this.worker.readLimits() };
  }
}
