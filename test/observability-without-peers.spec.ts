import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { SWC_REGISTER } from './support/typescript-node';
import { useTestBed } from './support/test-bed';

const execFileAsync = promisify(execFile);
const FIXTURES = join(__dirname, 'fixtures/observability');

/*
 * @opentelemetry/api and prom-client are optional peers: in a process where neither can be
 * resolved (hidden by a require hook, as in an app that never installed them), the module boots
 * and runs workflows, tracing is simply off, and only the `metrics` option asks for prom-client.
 */
describe('observability without its optional peers', () => {
  const bed = useTestBed();

  it('boots and runs a rollback with neither package, and `metrics: true` names the package to install', async () => {
    const { stdout } = await execFileAsync(
      process.execPath,
      ['-r', join(FIXTURES, 'hide-packages.js'), '-r', SWC_REGISTER, join(FIXTURES, 'without-peers-main.ts')],
      {
        env: { ...process.env, DATABASE_URL: bed.db.url, DURAFLOW_HIDDEN_PACKAGES: '@opentelemetry/api,prom-client', NO_COLOR: '1' },
        timeout: 120_000,
      },
    );
    const result = JSON.parse(stdout.trim().split('\n').pop()!);
    expect(result).toEqual({
      hidden: { '@opentelemetry/api': true, 'prom-client': true },
      status: 'rolled_back',
      traceContext: null,
      metrics: {
        name: 'MissingDependencyError',
        code: 'MISSING_DEPENDENCY',
        message:
          'The DuraflowModule option "metrics" (Prometheus metrics) needs "prom-client", which is not installed: run `npm install prom-client`.',
      },
    });
  });
});
