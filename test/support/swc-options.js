/**
 * The @swc/core options the project's TypeScript is compiled with, in jest (jest.config.js, through
 * @swc/jest) and in child processes (swc-register.js): decorator metadata for Nest DI, CommonJS.
 */
'use strict';

module.exports = {
  jsc: {
    parser: { syntax: 'typescript', decorators: true },
    transform: { legacyDecorator: true, decoratorMetadata: true },
    keepClassNames: true,
    target: 'es2022',
  },
  module: { type: 'commonjs' },
  sourceMaps: 'inline',
};
