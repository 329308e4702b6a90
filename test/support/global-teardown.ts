import kitTeardown from '../../libs/duraflow/src/testing/global-teardown';
import { TEST_SERVERS_KEY } from './global-setup';
import type { TestServers } from './test-servers';

/**
 * Jest's global teardown, after every run that got past the setup, failed tests included: the
 * testing kit's own teardown (`@duraflow/nestjs/testing/global-teardown`: drops the templates
 * its environments were cloned from, on the run's DATABASE_URL), then stops the servers the setup started.
 */
export default async function globalTeardown(): Promise<void> {
  try {
    await kitTeardown();
  } finally {
    const servers = (globalThis as Record<symbol, TestServers | undefined>)[TEST_SERVERS_KEY];
    await servers?.stop();
  }
}
