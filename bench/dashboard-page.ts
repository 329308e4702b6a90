/**
 * Page load time of the dashboard's task page for a task of 100 steps (one of them with a
 * 400 KB output, which the page cuts), in headless Chromium against the test fixture app on
 * real PostgreSQL. Not part of `npm run bench` (it needs Chromium):
 *
 *   node -r ./test/support/swc-register.js bench/dashboard-page.ts [--loads 20]
 *
 * Prints one Markdown table; figures and how to read them in bench/README.md.
 */
import { WorkflowService } from '@duraflow/nestjs';
import { OPERATOR_COOKIE, startDashboardApp } from '../test/fixtures/dashboard/dashboard-app';
import { launchBrowser } from '../test/support/browser';
import { TestBed } from '../test/support/test-bed';
import { median, progress, quantile } from './stats';

const STEPS = 100;

async function main(): Promise<void> {
  const loadsFlag = process.argv.indexOf('--loads');
  const loads = loadsFlag > 0 ? Number(process.argv[loadsFlag + 1]) : 20;
  const bed = new TestBed();
  await bed.setUp({ prefix: 'duraflow_bench' });
  const app = await startDashboardApp(bed);
  // The browser keeps connections open: cut first, or closing the app would wait for them.
  bed.beforeClosing(async () => app.app.getHttpServer().closeAllConnections());
  const chromium = await launchBrowser();
  try {
    const workflows = app.app.get(WorkflowService);
    const task = await workflows.waitFor((await workflows.submit('many-steps', { steps: STEPS })).id, { timeoutMs: 60_000 });
    const url = `${app.url}/ops/duraflow/tasks/${task.id}`;

    // The server alone: the HTML as a client receives it (no browser).
    const server: number[] = [];
    let bytes = 0;
    for (let i = 0; i < loads + 2; i++) {
      const started = nowMs();
      const response = await fetch(url, { headers: { cookie: `${OPERATOR_COOKIE.name}=${OPERATOR_COOKIE.value}` } });
      bytes = (await response.text()).length;
      if (i >= 2) server.push(nowMs() - started);
    }

    // The browser: navigation to the load event, then the page's own timing entries.
    const page = await chromium.browser.newPage();
    await page.setViewport({ width: 1200, height: 800 });
    await page.setCookie({ name: OPERATOR_COOKIE.name, value: OPERATOR_COOKIE.value, url: app.url });
    const load: number[] = [];
    const firstByte: number[] = [];
    const contentLoaded: number[] = [];
    for (let i = 0; i < loads + 2; i++) {
      await page.goto(url, { waitUntil: 'load' });
      // Runs in the page: the browser's PerformanceNavigationTiming, as plain numbers.
      const timing = JSON.parse(String(await page.evaluate(`JSON.stringify(performance.getEntriesByType('navigation')[0])`))) as Record<
        string,
        number
      >;
      if (i < 2) continue; // warm-up: JIT, connection, caches
      firstByte.push(timing.responseStart - timing.requestStart);
      contentLoaded.push(timing.domContentLoadedEventEnd - timing.startTime);
      load.push(timing.loadEventEnd - timing.startTime);
      progress(`load ${i - 1}/${loads}: ${Math.round(timing.loadEventEnd - timing.startTime)} ms`);
    }
    const row = (figure: string, samples: number[]) =>
      `| ${figure} | ${median(samples).toFixed(0)} ms | ${quantile(samples, 0.95).toFixed(0)} ms |`;
    console.log(
      `Task page of ${STEPS} steps (one output of 400 KB, cut to its first 2,048 characters): ${(bytes / 1024).toFixed(0)} KiB of HTML, ${loads} loads after 2 warm-ups\n`,
    );
    console.log('| figure | median | p95 |');
    console.log('|---|---|---|');
    console.log(row('server: request to the last byte of HTML (fetch, no browser)', server));
    console.log(row('browser: request to first byte', firstByte));
    console.log(row('browser: navigation to DOMContentLoaded', contentLoaded));
    console.log(row('browser: navigation to load (page load time)', load));
  } finally {
    await chromium.close();
    await bed.tearDown();
  }
}

function nowMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
