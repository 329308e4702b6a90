import { createServer } from 'node:net';

/** A port nothing listens on right now, for servers that cannot bind port 0 and report it (gRPC, a private Redis). */
export { freePort } from '../../src/db/embedded-database';

export interface TakenPort {
  port: number;
  /** Stops listening on it. */
  release(): void;
}

/** A port this process listens on (127.0.0.1), for tests of a server whose port is taken. */
export async function takePort(): Promise<TakenPort> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as { port: number }).port, release: () => server.close() };
}
