import { Controller, Get, Inject } from '@nestjs/common';
import { HealthCheck, HealthCheckService, HealthIndicatorFunction, TypeOrmHealthIndicator } from '@nestjs/terminus';
import { Public } from '../auth/api-key.guard';
import { EngineConfig } from '../config/engine.config';
import { ENGINE_CONFIG } from '../config/engine-config.token';
import { RedisHealthIndicator } from './redis.health';

/** `GET /health`: the database, and Redis when REDIS_URL is set. Open even with an API key. */
@Controller('health')
export class HealthController {
  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    private readonly health: HealthCheckService,
    private readonly database: TypeOrmHealthIndicator,
    private readonly redis: RedisHealthIndicator,
  ) {}

  @Get()
  @Public()
  @HealthCheck()
  check() {
    const checks: HealthIndicatorFunction[] = [() => this.database.pingCheck('database', { timeout: 2_000 })];
    if (this.config.redisUrl) checks.push(() => this.redis.pingCheck('redis'));
    return this.health.check(checks);
  }
}
