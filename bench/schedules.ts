/**
 * Schedules on several nodes: N Nest apps (production defaults, worker enabled) on one database
 * tick one every-second schedule for D seconds. Prints, per tick, how late its task was written
 * (`agent_tasks.created_at`, the start of the winning transaction) and started
 * (`started_at`, claimed by a worker), after the tick's time; and that each tick has one task.
 *
 *   node -r ./test/support/swc-register.js bench/schedules.ts [--nodes 3] [--seconds 30]
 */
import 'reflect-metadata';
import { INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DURAFLOW_ENTITIES, DuraflowModule, workflow } from '@duraflow/nestjs';
import { createBenchDatabase } from './database';
import { progress, quantile } from './stats';

const argument = (name: string, fallback: number) => {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? Number(process.argv[at + 1]) : fallback;
};

const scheduledNoop = workflow('scheduled-noop', async () => ({ ok: true }));

async function startNode(databaseUrl: string): Promise<INestApplicationContext> {
  @Module({
    imports: [
      ScheduleModule.forRoot(),
      TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl, entities: [...DURAFLOW_ENTITIES] }),
      DuraflowModule.forRoot({
        workflows: [scheduledNoop],
        schedules: [{ name: 'every-second', workflow: 'scheduled-noop', cron: '* * * * * *', catchUp: 'all' }],
      }),
    ],
  })
  class ScheduleNodeModule {}
  const app = await NestFactory.createApplicationContext(ScheduleNodeModule, { logger: ['warn', 'error', 'fatal'], abortOnError: false });
  await app.init();
  return app;
}

async function main(): Promise<void> {
  const nodes = argument('nodes', 3);
  const seconds = argument('seconds', 30);
  const db = await createBenchDatabase();
  try {
    progress(`${nodes} node(s) tick an every-second schedule for ${seconds} s`);
    const apps: INestApplicationContext[] = [];
    for (let i = 0; i < nodes; i++) apps.push(await startNode(db.url));
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    for (const app of apps) await app.close();

    const { rows } = await db.client.query<{ created_ms: number; started_ms: number | null }>(
      `SELECT EXTRACT(EPOCH FROM a.created_at - k.tick_at)::float8 * 1000 AS created_ms,
              EXTRACT(EPOCH FROM a.started_at - k.tick_at)::float8 * 1000 AS started_ms
       FROM duraflow_schedule_ticks k JOIN agent_tasks a ON a.id = k.task_id`,
    );
    const { rows: counts } = await db.client.query<{ tasks: number; keys: number; ticks: number }>(
      `SELECT count(*)::int AS tasks, count(DISTINCT idempotency_key)::int AS keys,
              (SELECT count(*)::int FROM duraflow_schedule_ticks) AS ticks FROM agent_tasks`,
    );
    const created = rows.map((row) => row.created_ms);
    const started = rows.filter((row) => row.started_ms !== null).map((row) => row.started_ms!);
    const ms = (value: number) => `${value.toFixed(1)} ms`;
    console.log(`| figure (${nodes} nodes, ${seconds} s, every-second schedule) | value |`);
    console.log('|---|---|');
    console.log(`| ticks / tasks / distinct tick keys | ${counts[0].ticks} / ${counts[0].tasks} / ${counts[0].keys} |`);
    console.log(
      `| tick -> task written (created_at) p50 / p95 / max | ${ms(quantile(created, 0.5))} / ${ms(quantile(created, 0.95))} / ${ms(Math.max(...created))} |`,
    );
    console.log(`| tick -> task started (started_at) p50 / p95 | ${ms(quantile(started, 0.5))} / ${ms(quantile(started, 0.95))} |`);
  } finally {
    await db.drop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
