import { Controller, Get, Header, Res } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import { DuraflowMetrics } from '@duraflow/nestjs';

/**
 * `GET /metrics`: the engine's Prometheus metrics in the text exposition format — Duraflow's
 * (docs/observability.md, "Metrics") and the Node.js process's. Behind the API key like every route but
 * `/health`: a scraper sends it (`authorization: { credentials: <key> }` in Prometheus).
 */
@Controller('metrics')
export class MetricsController {
  constructor(private readonly metrics: DuraflowMetrics) {}

  @Get()
  @Header('Cache-Control', 'no-store')
  async scrape(@Res({ passthrough: true }) response: ServerResponse): Promise<string> {
    const text = await this.metrics.metrics();
    response.setHeader('Content-Type', this.metrics.contentType);
    return text;
  }
}
