import { Client, ClientConfig, PoolConfig } from 'pg';

/**
 * The pool's settings a connection to `listenUrl` keeps: how it talks to a server (TLS, keepalive,
 * the connect timeout), never which server or as whom (the URL says that).
 */
const CARRIED_OVER = ['keepAlive', 'keepAliveInitialDelayMillis', 'connectionTimeoutMillis'] as const;

/**
 * The settings of a connection outside the pool (LISTEN, the leader's lease, a dead letter's
 * claim). Without `listenUrl`: the pool's own. With it: that URL, with the pool's TLS as pg would
 * apply it (an `sslmode` in the pool's URL, else its `ssl` option) and the settings above, unless
 * the listen URL says otherwise (its own `sslmode`, `sslrootcert`…, which pg reads over them).
 * A `listenUrl` without TLS settings thus never turns TLS off where the pool uses it.
 */
export function dedicatedClientConfig(pool: PoolConfig, listenUrl: string | undefined, applicationName?: string): ClientConfig {
  const name = applicationName ? { application_name: applicationName } : {};
  if (!listenUrl) return { ...pool, ...name };
  const carried: ClientConfig = {};
  for (const option of CARRIED_OVER) if (pool[option] !== undefined) Object.assign(carried, { [option]: pool[option] });
  const ssl = effectiveSsl(pool);
  return { ...carried, ...(ssl ? { ssl } : {}), connectionString: listenUrl, ...name };
}

/** The TLS a pool's connection uses: pg lets the URL's TLS parameters win over the `ssl` option. */
function effectiveSsl(pool: PoolConfig): ClientConfig['ssl'] {
  // Parsing only: a Client connects on connect(), not when it is made.
  const parameters = (new Client(pool) as unknown as { connectionParameters: { ssl?: ClientConfig['ssl'] } }).connectionParameters;
  return parameters.ssl;
}
