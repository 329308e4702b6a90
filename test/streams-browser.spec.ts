import { Controller, Get, Headers, Header, MessageEvent, Param, Req, Sse } from '@nestjs/common';
import type { Socket } from 'node:net';
import { Observable } from 'rxjs';
import { streamEvents, WorkflowContext, WorkflowService, workflow } from '@duraflow/nestjs';
import { launchBrowser, TestBrowser } from './support/browser';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

/*
 * A host app's @Sse() route over streamEvents, read by Chromium's EventSource: the server cuts
 * the connection mid-stream, the browser reconnects with Last-Event-ID, and the page has seen
 * every chunk of a token-by-token stream exactly once, in order, then the end event.
 */

/** The page's globals, as page.evaluate sees them (the tests compile without the DOM's types). */
declare const window: any;

const bed = useTestBed({ databasePerTest: true });
const TOKENS = 20;
const CUT_AFTER = 8;

const gates = new Map<string, () => void>();
const gate = (taskId: string) => new Promise<void>((resolve) => gates.set(taskId, resolve));

/** Tokens 1..CUT_AFTER, a pause the test ends, then the rest (written while the browser is away), and the close. */
const chat = workflow('sse-chat', async (ctx: WorkflowContext) => {
  for (let n = 1; n <= TOKENS; n++) {
    if (n === CUT_AFTER + 1) await gate(ctx.runId);
    await ctx.writeStream('tokens', `token-${n}`);
  }
  await ctx.closeStream('tokens');
});

/** The SSE requests the server got (their Last-Event-ID) and their sockets, for the test to cut. */
const requests: Array<{ lastEventId: string | undefined; socket: Socket }> = [];

@Controller()
class ChatController {
  constructor(private readonly workflows: WorkflowService) {}

  @Get('chat/:id')
  @Header('content-type', 'text/html; charset=utf-8')
  page(@Param('id') id: string): string {
    return `<!doctype html><html><body><script>
      window.seen = []; window.ended = false; window.errors = 0;
      const source = new EventSource('/chat/${id}/tokens');
      source.onmessage = (event) => window.seen.push({ id: event.lastEventId, token: JSON.parse(event.data) });
      source.onerror = () => window.errors++;
      source.addEventListener('end', () => { window.ended = true; source.close(); });
    </script></body></html>`;
  }

  @Sse('chat/:id/tokens')
  tokens(
    @Param('id') id: string,
    @Headers('last-event-id') lastEventId: string | undefined,
    @Req() request: { socket: Socket },
  ): Observable<MessageEvent> {
    requests.push({ lastEventId, socket: request.socket });
    return streamEvents(this.workflows, id, 'tokens', { lastEventId, retryMs: 100 });
  }
}

describe('a stream read by a browser over Server-Sent Events', () => {
  let chromium: TestBrowser;

  beforeAll(async () => {
    chromium = await launchBrowser();
  });
  afterAll(() => chromium?.close());

  it('reconnects with Last-Event-ID after the server cut it, and sees every chunk once, in order', async () => {
    const app = await bed.serve({ duraflow: { workflows: [chat], worker: { shutdownTimeoutMs: 100 } }, controllers: [ChatController] });
    const workflows = app.app.get(WorkflowService);
    const task = await workflows.submit('sse-chat');
    const page = await chromium.browser.newPage();
    await page.goto(`${app.url}/chat/${task.id}`);

    await page.waitForFunction((n) => window.seen.length === n, { timeout: 20_000 }, CUT_AFTER);
    await eventually('the run paused', () => gates.has(task.id));
    requests[0].socket.destroy(); // the server side goes away mid-stream
    gates.get(task.id)!();

    await page.waitForFunction(() => window.ended, { timeout: 20_000 });
    const seen: Array<{ id: string; token: string }> = await page.evaluate(() => window.seen);
    const expected = Array.from({ length: TOKENS }, (_, i) => ({ id: String(i + 1), token: `token-${i + 1}` }));
    expect(seen).toEqual(expected);
    expect(await page.evaluate(() => window.errors)).toBeGreaterThanOrEqual(1);
    expect(requests.map((request) => request.lastEventId)).toEqual([undefined, String(CUT_AFTER)]);
  }, 60_000);
});
