import { TestingModule } from '@nestjs/testing';
import { workflow } from '@duraflow/nestjs';
import { SHUTDOWN_HOOKS_CHECK_DELAY_MS } from '../libs/duraflow/src/background/shutdown-hooks.check';
import { eventually, sleep } from './support/waiting';
import { CapturedLogs } from './support/captured-logs';
import { useTestBed } from './support/test-bed';

const noop = workflow('noop', async () => null);
const WARNING = /Shutdown hooks are not enabled: call app\.enableShutdownHooks\(\)/;

describe('the warning when the host has not enabled shutdown hooks', () => {
  const bed = useTestBed();
  let nodeEnv: string | undefined;
  let logger: CapturedLogs;

  beforeEach(() => {
    nodeEnv = process.env.NODE_ENV;
    // Jest sets NODE_ENV=test, under which the check stays quiet: these tests play a production app.
    process.env.NODE_ENV = 'production';
    logger = new CapturedLogs();
    expect(process.listenerCount('SIGTERM')).toBe(0);
  });

  afterEach(() => {
    process.env.NODE_ENV = nodeEnv;
  });

  async function start(worker = true): Promise<TestingModule> {
    const app = await bed.start({ duraflow: { workflows: [noop], worker: { enabled: worker } } });
    app.useLogger(logger);
    return app;
  }

  /** Long enough for the check to have run, with room for a loaded machine. */
  const afterTheCheck = () => sleep(SHUTDOWN_HOOKS_CHECK_DELAY_MS * 3);

  it('warns once, after bootstrap, when nothing handles SIGTERM', async () => {
    await start();
    await eventually('the warning is logged', () => logger.warnings.some((line) => WARNING.test(line)));
    await afterTheCheck();
    expect(logger.warnings.filter((line) => WARNING.test(line))).toHaveLength(1);
    expect(logger.warnings.find((line) => WARNING.test(line))).toMatch(/SIGTERM .* hands its running tasks back/);
  });

  it('stays quiet when the host calls app.enableShutdownHooks(), even after the app started', async () => {
    const started = await start();
    started.enableShutdownHooks();
    await afterTheCheck();
    expect(logger.warnings.filter((line) => WARNING.test(line))).toEqual([]);
  });

  it('stays quiet when the host handles SIGTERM itself', async () => {
    const closeOnSigterm = () => undefined;
    process.on('SIGTERM', closeOnSigterm);
    try {
      await start();
      await afterTheCheck();
      expect(logger.warnings.filter((line) => WARNING.test(line))).toEqual([]);
    } finally {
      process.removeListener('SIGTERM', closeOnSigterm);
    }
  });

  it('stays quiet on a submit-only node (no worker to hand tasks back)', async () => {
    await start(false);
    await afterTheCheck();
    expect(logger.warnings.filter((line) => WARNING.test(line))).toEqual([]);
  });

  it('stays quiet under NODE_ENV=test, where the test closes the app', async () => {
    process.env.NODE_ENV = 'test';
    await start();
    await afterTheCheck();
    expect(logger.warnings.filter((line) => WARNING.test(line))).toEqual([]);
  });
});
