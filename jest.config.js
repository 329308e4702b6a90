/**
 * Tests run against the real PostgreSQL and Redis; each file makes its own database. The global
 * setup finds the servers, or starts private ones for the run (test/support/test-servers.ts).
 */
const swc = require('./test/support/swc-options');

module.exports = {
  rootDir: '.',
  testEnvironment: 'node',
  testRegex: '(test|libs)/.*\\.spec\\.ts$',
  // `nest new` skeletons with tests of their own, which the consumer test runs in a copy.
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/fixtures/nest-new/'],
  modulePathIgnorePatterns: ['<rootDir>/test/fixtures/nest-new/'],
  moduleFileExtensions: ['ts', 'js', 'json'],
  transform: { '^.+\\.ts$': ['@swc/jest', swc] },
  moduleNameMapper: {
    '^@duraflow/nestjs$': '<rootDir>/libs/duraflow/src',
    '^@duraflow/nestjs/(.*)$': '<rootDir>/libs/duraflow/src/$1',
    // examples/host-app is an ES-module-style app (`./x.js` imports of its .ts files); its tests run here too.
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  maxWorkers: 2,
  testTimeout: 30000,
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
};
