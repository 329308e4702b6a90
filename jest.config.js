/** Tests run against the real PostgreSQL and Redis; each file makes its own database. */
const swc = {
  jsc: {
    parser: { syntax: 'typescript', decorators: true },
    transform: { legacyDecorator: true, decoratorMetadata: true },
    keepClassNames: true,
    target: 'es2022',
  },
  module: { type: 'commonjs' },
  sourceMaps: 'inline',
};

module.exports = {
  rootDir: '.',
  testEnvironment: 'node',
  testRegex: '(test|libs)/.*\\.spec\\.ts$',
  moduleFileExtensions: ['ts', 'js', 'json'],
  transform: { '^.+\\.ts$': ['@swc/jest', swc] },
  moduleNameMapper: {
    '^@duraflow/nestjs$': '<rootDir>/libs/duraflow/src',
    '^@duraflow/nestjs/(.*)$': '<rootDir>/libs/duraflow/src/$1',
  },
  maxWorkers: 2,
  testTimeout: 30000,
};
