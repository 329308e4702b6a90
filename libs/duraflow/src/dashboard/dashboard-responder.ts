import { Injectable } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { DASHBOARD_HEADERS, HTML_CONTENT_TYPE, JSON_CONTENT_TYPE } from './security-headers';
import { Html } from './views/html';

/** What a dashboard handler answers. */
export type DashboardReply =
  { kind: 'page'; body: Html; status?: number } | { kind: 'redirect'; to: string } | { kind: 'json'; body: string; filename: string };

export const page = (body: Html, status = 200): DashboardReply => ({ kind: 'page', body, status });
export const redirect = (to: string): DashboardReply => ({ kind: 'redirect', to });

/**
 * Writes a reply through Nest's HTTP adapter (Express or Fastify alike), with the dashboard's
 * security headers on every answer, refusals and errors included.
 */
@Injectable()
export class DashboardResponder {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  send(response: unknown, reply: DashboardReply): void {
    const adapter = this.adapterHost.httpAdapter;
    for (const [name, value] of Object.entries(DASHBOARD_HEADERS)) adapter.setHeader(response, name, value);
    switch (reply.kind) {
      case 'page':
        adapter.setHeader(response, 'Content-Type', HTML_CONTENT_TYPE);
        adapter.reply(response, reply.body.value, reply.status ?? 200);
        return;
      case 'json':
        adapter.setHeader(response, 'Content-Type', JSON_CONTENT_TYPE);
        adapter.setHeader(response, 'Content-Disposition', `inline; filename="${reply.filename}"`);
        adapter.reply(response, reply.body, 200);
        return;
      case 'redirect':
        // 303: after a POST the browser GETs the result, so a reload never repeats the action.
        adapter.redirect(response, 303, reply.to);
        return;
    }
  }
}
