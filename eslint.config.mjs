// Lint for the library, the engine, the tests and the bench (run by `npm test`).
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import globals from 'globals';
import tseslint from 'typescript-eslint';
import architecture from './eslint/architecture.mjs';

/**
 * The library's layers, from the ground up (ARCHITECTURE.md draws them): a file imports only
 * from its own folder and from the layers below its own. Folders that share a layer are
 * independent of each other.
 */
const LIBRARY_LAYERS = [
  ['migrations'],
  ['domain'],
  ['util'],
  ['dependencies'],
  ['config'],
  ['codec'],
  ['validation'],
  ['decorators'],
  ['discovery'],
  ['persistence'],
  ['lease', 'notifications'],
  ['leader'],
  ['observability'],
  ['execution'],
  ['background'],
  ['schedules'],
  ['replay'],
  ['events'],
  ['services'],
  ['http', 'dashboard', 'cli'],
  ['duraflow.module.ts'],
  ['index.ts'],
  ['testing'],
];

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      'coverage/**',
      '.duraflow/**',
      '.test-build/**',
      'examples/**/dist/**',
      'test/fixtures/nest-new/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  prettier,
  {
    languageOptions: { ecmaVersion: 2022, sourceType: 'module' },
    rules: {
      // Nest and TypeORM hand back untyped rows and metadata; `any` at those edges is deliberate.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true },
      ],
      // Decorated classes with no members and interfaces that name a shape are part of Nest's idiom.
      '@typescript-eslint/no-extraneous-class': 'off',
      '@typescript-eslint/no-empty-object-type': 'off',
      // Decorator metadata is read off any function (a class or a method), as Nest's Reflector takes it.
      '@typescript-eslint/no-unsafe-function-type': 'off',
      // A variable a closure reads before its one assignment (a signal handler during start) stays `let`.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      eqeqeq: ['error', 'always', { null: 'ignore' }],
      'no-console': ['error', { allow: ['warn', 'error'] }],
    },
  },
  {
    files: ['libs/duraflow/src/**/*.ts'],
    plugins: { duraflow: architecture },
    rules: {
      'duraflow/layers': ['error', { root: 'libs/duraflow/src', layers: LIBRARY_LAYERS }],
      'duraflow/no-cycle': 'error',
      'duraflow/task-lifecycle': ['error', { owner: 'libs/duraflow/src/persistence/lifecycle' }],
      // Sizes a reader can hold; a long SQL text is a named constant beside its function, not its body.
      'max-lines': ['error', { max: 300 }],
      'max-lines-per-function': ['error', { max: 60 }],
    },
  },
  {
    // The public facade (`workflows.*`): one documented delegation per method of the contract, to
    // the jobs in services/workflows/, events/ and schedules/. Its length is its API's, not logic.
    files: ['libs/duraflow/src/services/workflow.service.ts'],
    rules: { 'max-lines': ['error', { max: 450 }] },
  },
  {
    // A migration is one schema change, read top to bottom; its trigger's move is named in task-lifecycle.ts.
    files: ['libs/duraflow/src/migrations/**/*.ts'],
    rules: { 'max-lines-per-function': 'off', 'duraflow/task-lifecycle': 'off' },
  },
  {
    files: ['src/**/*.ts'],
    plugins: { duraflow: architecture },
    rules: { 'duraflow/no-cycle': 'error' },
  },
  {
    // The CLI, the bench and the test tooling print to the terminal; CommonJS helpers use require.
    files: ['libs/duraflow/src/cli/**', 'src/db/migrate.ts', 'bench/**', 'test/**', 'examples/**', '**/*.js', '**/*.cjs'],
    rules: { 'no-console': 'off', '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    files: ['**/*.js', '**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: globals.node },
  },
  {
    // The peers' side of the side-by-side bench: plain ES modules run by node (bench/peers-compare.ts).
    files: ['bench/peers/**/*.mjs'],
    languageOptions: { sourceType: 'module', globals: globals.node },
  },
);
