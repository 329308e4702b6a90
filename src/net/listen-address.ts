import { isIP } from 'node:net';

/** Whether only this machine can reach an address (127.0.0.0/8, ::1, localhost). */
export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host) || host === '::ffff:127.0.0.1';
}

/** Every interface: reachable from any network this machine is on. */
export function isWildcard(host: string): boolean {
  return host === '0.0.0.0' || host === '::';
}

/** `host:port` as a URL or gRPC target writes it (IPv6 in brackets). */
export function hostPort(host: string, port: number): string {
  return `${isIP(host) === 6 ? `[${host}]` : host}:${port}`;
}

/** An address to connect to a server bound to `host` from this machine. */
export function connectableHost(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '::1';
  return host;
}
