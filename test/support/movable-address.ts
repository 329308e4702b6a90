import { createServer, Server, Socket, connect } from 'node:net';

/**
 * An address that moves: a TCP proxy in the test's process on 127.0.0.1:<port>, standing in for
 * a virtual IP or a DNS name in front of a PostgreSQL failover pair (test/support/failover-pair.ts).
 * Each new connection goes to the current target; `moveTo` changes it and, as a host that is
 * gone would, cuts the sessions still open to the old one, unless told to keep them (a DNS
 * change leaves open sessions where they were).
 */
export class MovableAddress {
  private readonly sessions = new Map<Socket, { upstream: Socket; targetPort: number }>();

  private constructor(
    private readonly server: Server,
    private target: number,
  ) {}

  static async start(targetPort: number): Promise<MovableAddress> {
    const server = createServer();
    const address = new MovableAddress(server, targetPort);
    server.on('connection', (client) => address.pipe(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    return address;
  }

  get port(): number {
    return (this.server.address() as { port: number }).port;
  }

  get targetPort(): number {
    return this.target;
  }

  /** New connections go to `targetPort`; open ones are cut unless `keepSessions`. */
  moveTo(targetPort: number, options: { keepSessions?: boolean } = {}): void {
    this.target = targetPort;
    if (options.keepSessions) return;
    for (const [client, { upstream, targetPort: port }] of this.sessions) {
      if (port === targetPort) continue;
      client.destroy();
      upstream.destroy();
    }
  }

  /** How many sessions are open through it, by the server port they reach. */
  openSessions(): Map<number, number> {
    const counts = new Map<number, number>();
    for (const { targetPort } of this.sessions.values()) counts.set(targetPort, (counts.get(targetPort) ?? 0) + 1);
    return counts;
  }

  async close(): Promise<void> {
    for (const [client, { upstream }] of this.sessions) {
      client.destroy();
      upstream.destroy();
    }
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private pipe(client: Socket): void {
    const targetPort = this.target;
    const upstream = connect({ host: '127.0.0.1', port: targetPort });
    this.sessions.set(client, { upstream, targetPort });
    const close = () => {
      client.destroy();
      upstream.destroy();
      this.sessions.delete(client);
    };
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    client.pipe(upstream);
    upstream.pipe(client);
    for (const socket of [client, upstream]) {
      socket.on('error', close);
      socket.on('close', close);
    }
  }
}
