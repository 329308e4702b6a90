import { stopTestServer } from './global-setup';

/** Jest's global teardown for `@duraflow/nestjs/testing` (`globalTeardown: '@duraflow/nestjs/testing/global-teardown'`). */
export default stopTestServer;
