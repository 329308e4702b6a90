import { createServer, Server, Socket, connect } from 'node:net';

/**
 * A TCP proxy that holds every chunk `delayMs` before passing it on, each way: the link delay
 * `tc netem` would add, for kernels without sch_netem (this machine's). A round trip through it
 * costs 2 × delayMs plus a hop through this process. Chunks keep their order (timers of one
 * duration fire in the order they were set).
 */
export class DelayProxy {
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly host: string,
    readonly port: number,
  ) {}

  static async start(listenHost: string, targetPort: number, delayMs: number): Promise<DelayProxy> {
    const sockets = new Set<Socket>();
    const server = createServer((client) => {
      const upstream = connect({ host: '127.0.0.1', port: targetPort });
      for (const socket of [client, upstream]) {
        socket.setNoDelay(true);
        sockets.add(socket);
      }
      const close = () => {
        client.destroy();
        upstream.destroy();
        sockets.delete(client);
        sockets.delete(upstream);
      };
      const pipe = (from: Socket, to: Socket) =>
        from.on('data', (chunk) => {
          if (delayMs > 0) setTimeout(() => to.writable && to.write(chunk), delayMs);
          else to.write(chunk);
        });
      pipe(client, upstream);
      pipe(upstream, client);
      for (const socket of [client, upstream]) {
        socket.on('error', close);
        socket.on('close', () => setTimeout(close, delayMs));
      }
    });
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, listenHost, resolve));
    const proxy = new DelayProxy(server, listenHost, (server.address() as { port: number }).port);
    for (const socket of sockets) proxy.sockets.add(socket);
    return proxy;
  }

  close(): void {
    for (const socket of this.sockets) socket.destroy();
    this.server.close();
  }
}
