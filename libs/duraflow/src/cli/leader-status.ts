import { loadIoredis } from '../dependencies/optional-dependencies';
import { RedisUnreachableError } from './cli.errors';

export interface RedisLeader {
  /** The key's value: the leader's worker id; null when no node leads. */
  workerId: string | null;
  /** Milliseconds until the key expires unless the leader renews it. */
  expiresInMs: number | null;
}

const REDIS_TIMEOUT_MS = 5_000;

/** Reads the reaper leader's key from Redis (`duraflow status --redis`). */
export async function readRedisLeader(redisUrl: string, key: string): Promise<RedisLeader> {
  let parsed: URL | undefined;
  try {
    parsed = new URL(redisUrl);
  } catch {
    // Reported below.
  }
  if (!parsed || (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:')) {
    throw new RedisUnreachableError(`Invalid Redis URL "${redisUrl.replace(/:[^:@/]*@/, ':***@')}": expected redis://host:6379.`);
  }
  const where = `${parsed.hostname}:${parsed.port || '6379'}`;
  const { Redis } = loadIoredis();
  const client = new Redis(redisUrl, {
    lazyConnect: true,
    connectTimeout: REDIS_TIMEOUT_MS,
    commandTimeout: REDIS_TIMEOUT_MS,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  // The cause of a failed connection arrives as an 'error' event; connect() only says it closed.
  let cause: Error | undefined;
  client.on('error', (error: Error) => (cause ??= error));
  try {
    await client.connect();
    const [workerId, ttl] = await Promise.all([client.get(key), client.pttl(key)]);
    return { workerId, expiresInMs: workerId === null || ttl < 0 ? null : ttl };
  } catch (error) {
    const reason = (cause ?? (error as Error)).message || String(error);
    throw new RedisUnreachableError(`Cannot read the reaper leader from Redis at ${where}: ${reason.replace(/\.$/, '')}.`);
  } finally {
    client.disconnect();
  }
}
