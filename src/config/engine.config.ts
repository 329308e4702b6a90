import { databaseUrl } from '../db/database-url';

/** The engine's settings, read once from the environment; a bad value stops the start. */
export interface EngineConfig {
  port: number;
  databaseUrl: string;
  /** Apply migrations/ on start. */
  migrate: boolean;
  /** Run a worker in this process (false = a submit-only node). */
  worker: boolean;
  concurrency: number;
}

export class EngineConfigError extends Error {
  constructor(variable: string, value: string, expected: string) {
    super(`Environment variable ${variable}=${JSON.stringify(value)} is invalid: expected ${expected}.`);
    this.name = 'EngineConfigError';
  }
}

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new EngineConfigError(name, raw, `an integer from ${min} to ${max}`);
  }
  return value;
}

function boolean(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (/^(true|1|yes)$/i.test(raw)) return true;
  if (/^(false|0|no)$/i.test(raw)) return false;
  throw new EngineConfigError(name, raw, 'true or false');
}

export function loadEngineConfig(env: NodeJS.ProcessEnv = process.env): EngineConfig {
  return {
    port: integer(env, 'PORT', 3000, 0, 65535),
    databaseUrl: databaseUrl(),
    migrate: boolean(env, 'DURAFLOW_MIGRATE', true),
    worker: boolean(env, 'DURAFLOW_WORKER', true),
    concurrency: integer(env, 'DURAFLOW_CONCURRENCY', 10, 1, 10_000),
  };
}
