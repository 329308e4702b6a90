import { TEST_SERVERS_KEY } from './global-setup';
import type { TestServers } from './test-servers';

/** Jest's global teardown, after every run that got past the setup, failed tests included: stops the servers the setup started. */
export default async function globalTeardown(): Promise<void> {
  const servers = (globalThis as Record<symbol, TestServers | undefined>)[TEST_SERVERS_KEY];
  await servers?.stop();
}
