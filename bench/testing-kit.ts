/**
 * The testing kit (@duraflow/nestjs/testing, issue 30 point 5): what a test pays for it.
 * - environment boot: the first on a server (the template database built: created, migrated)
 *   and the later ones (a clone of the template, Nest booted), and close() (database dropped);
 * - a test with a 30-day sleep end to end: submit, runUntilIdle, advanceTime('30d'), completed;
 * - advanceTime over 1,000 sleeping tasks: each sleeping a different number of minutes (1,000
 *   wake-ups the clock stops at, in order), and all sleeping the same day (one stop).
 * Not part of `npm run bench`:
 *
 *   node -r ./test/support/swc-register.js bench/testing-kit.ts [--boots 5]
 *
 * The first boot drops the server's kit templates first (so it builds one). Figures in
 * bench/README.md, "Testing kit".
 */
import 'reflect-metadata';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { TaskStatus, WorkflowContext, workflow } from '@duraflow/nestjs';
import { createDuraflowTestEnv, DuraflowTestEnv, Duration } from '@duraflow/nestjs/testing';
import { dropEnvTemplates } from '@duraflow/nestjs/testing/test-database';

const sleeper = workflow('kit-bench-sleeper', async (ctx: WorkflowContext<{ minutes: number }>) => {
  await ctx.step.run('before', () => 1);
  await ctx.sleep('nap', ctx.input.minutes * 60_000);
  return ctx.step.run('after', () => 2);
});
const OPTIONS = { options: { workflows: [sleeper], worker: { concurrency: 20 } } };

async function timed<T>(fn: () => Promise<T>): Promise<[T, number]> {
  const started = performance.now();
  const value = await fn();
  return [value, performance.now() - started];
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const ms = (value: number) => `${Math.round(value)} ms`;

async function thousandSleepers(env: DuraflowTestEnv, minutes: (i: number) => number, advance: Duration): Promise<number> {
  await env.workflows.submitMany(
    'kit-bench-sleeper',
    Array.from({ length: 1_000 }, (_, i) => ({ minutes: minutes(i) })),
  );
  await env.runUntilIdle();
  const [, took] = await timed(() => env.advanceTime(advance));
  const counts = await env.workflows.countByStatus({ workflowName: 'kit-bench-sleeper' });
  if (counts[TaskStatus.COMPLETED] !== 1_000) {
    throw new Error(`Not every task completed: ${JSON.stringify(counts)}`);
  }
  return took;
}

async function main(): Promise<void> {
  const boots = Number(process.argv[process.argv.indexOf('--boots') + 1]) || 5;
  const rows: Array<[string, string]> = [];

  await dropEnvTemplates();
  const [first, firstBoot] = await timed(() => createDuraflowTestEnv(OPTIONS));
  const [, firstClose] = await timed(() => first.close());
  rows.push(['environment boot, first on the server (template built)', ms(firstBoot)]);
  const bootTimes: number[] = [];
  const closeTimes: number[] = [];
  for (let i = 0; i < boots; i++) {
    const [env, boot] = await timed(() => createDuraflowTestEnv(OPTIONS));
    const [, close] = await timed(() => env.close());
    bootTimes.push(boot);
    closeTimes.push(close);
  }
  rows.push([`environment boot, later (median of ${boots})`, ms(median(bootTimes))]);
  rows.push([`close() (median of ${boots + 1})`, ms(median([firstClose, ...closeTimes]))]);

  const [, monthTest] = await timed(async () => {
    const env = await createDuraflowTestEnv(OPTIONS);
    try {
      const [, body] = await timed(async () => {
        const task = await env.workflows.submit('kit-bench-sleeper', { minutes: 30 * 24 * 60 });
        await env.runUntilIdle();
        await env.advanceTime('30d');
        const done = await env.workflows.get(task.id);
        if (done?.status !== TaskStatus.COMPLETED) throw new Error(`30-day sleep: ${done?.status}`);
      });
      rows.push(['a 30-day sleep: submit, runUntilIdle, advanceTime, completed', ms(body)]);
    } finally {
      await env.close();
    }
  });
  rows.push(['the same test with its environment boot and close', ms(monthTest)]);

  for (const [label, minutes, advance] of [
    ['advanceTime over 1,000 tasks sleeping 1 to 1,000 min (1,000 stops)', (i: number) => i + 1, '17h'],
    ['advanceTime over 1,000 tasks sleeping 24 h (one stop)', () => 24 * 60, '25h'],
  ] as const) {
    const env = await createDuraflowTestEnv(OPTIONS);
    try {
      rows.push([label, ms(await thousandSleepers(env, minutes, advance))]);
      console.error(`${label}: ${rows[rows.length - 1][1]}`);
    } finally {
      await env.close();
    }
  }

  console.log('| testing kit | time |\n|---|---:|');
  for (const [label, value] of rows) console.log(`| ${label} | ${value} |`);
  console.log(`\n(${os.cpus().length} cores, shared with whatever else runs on this machine)`);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
