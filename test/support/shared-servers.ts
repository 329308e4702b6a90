/**
 * Where the tests look for PostgreSQL and Redis when DATABASE_URL / REDIS_URL are unset: the
 * servers a CI machine or a developer runs on the standard ports (PostgreSQL with trust auth
 * for `postgres` on 127.0.0.1, as the migrations assume too). When nothing answers there, the
 * run starts private ones (test-servers.ts) and points DATABASE_URL / REDIS_URL at them.
 */
export { DEFAULT_DATABASE_URL } from '../../src/db/database-url';
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';
