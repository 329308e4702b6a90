import { Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { HealthIndicatorResult, HealthIndicatorService } from '@nestjs/terminus';
import Redis from 'ioredis';
import { EngineConfig } from '../config/engine.config';
import { ENGINE_CONFIG } from '../config/engine-config.token';

const PING_TIMEOUT_MS = 2_000;

/** Redis's health as the reaper's leader election sees it: does it answer PING? */
@Injectable()
export class RedisHealthIndicator implements OnApplicationShutdown {
  private client: Redis | undefined;

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    private readonly health: HealthIndicatorService,
  ) {}

  async pingCheck(key: string): Promise<HealthIndicatorResult> {
    const indicator = this.health.check(key);
    try {
      await Promise.race([
        this.connection().ping(),
        new Promise((_, reject) => setTimeout(() => reject(new Error(`no answer within ${PING_TIMEOUT_MS} ms`)), PING_TIMEOUT_MS).unref()),
      ]);
      return indicator.up();
    } catch (error) {
      return indicator.down({ message: error instanceof Error ? error.message : String(error) });
    }
  }

  onApplicationShutdown(): void {
    this.client?.disconnect();
  }

  /** One connection, opened on the first check; while Redis is down a PING fails instead of queueing. */
  private connection(): Redis {
    if (!this.client) {
      this.client = new Redis(this.config.redisUrl!, { maxRetriesPerRequest: 0, connectTimeout: PING_TIMEOUT_MS });
      // Reconnection errors are what the check reports; unhandled, ioredis would print each one.
      this.client.on('error', () => undefined);
    }
    return this.client;
  }
}
