import { createServer } from 'node:net';
import { hostPort } from './listen-address';

/** The engine cannot listen where it was told to: a busy port, an address this machine does not have. */
export class ListenError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ListenError';
  }
}

export interface ListenPort {
  /** The environment variable that sets it, named in the error. */
  variable: string;
  port: number;
}

/**
 * Stops the start before anything else happens (the embedded database above all) when one of
 * the ports cannot be bound on `host`. The real bind can still lose a race; it is explained
 * with the same words (`explainListenFailure`).
 */
export async function checkPortsFree(host: string, ports: ListenPort[]): Promise<void> {
  for (const { variable, port } of ports) {
    if (port === 0) continue;
    await new Promise<void>((resolve, reject) => {
      const probe = createServer();
      probe.once('error', (error) => reject(explainListenFailure(error, host, { variable, port })));
      probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve()));
    });
  }
}

/** A bind error in words that name the variable to change. Others are returned as they are. */
export function explainListenFailure(error: unknown, host: string, { variable, port }: ListenPort): unknown {
  const code = (error as NodeJS.ErrnoException)?.code;
  const where = hostPort(host, port);
  if (code === 'EADDRINUSE') {
    return new ListenError(
      `${variable}=${port}: ${where} is already in use (another engine or program listens there). Stop it, or set ${variable} to a free port.`,
    );
  }
  if (code === 'EACCES') {
    return new ListenError(
      `${variable}=${port}: this user may not listen on ${where} (ports below 1024 need privileges). Set ${variable} to a port above 1023.`,
    );
  }
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
    return new ListenError(
      `HOST=${host} is not an address of this machine. Set HOST to one of its addresses, 127.0.0.1 (this machine only) or 0.0.0.0 (every interface).`,
    );
  }
  return error;
}
