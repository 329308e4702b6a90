import { createServer, Server } from 'node:net';
import { AddressInfo } from 'node:net';
import { Client } from 'pg';
import { dedicatedClientConfig } from '../libs/duraflow/src/persistence/dedicated-client-config';

/**
 * Issue 35.9: the connection to `listenUrl` (LISTEN, the leader's lease, a dead letter's claim)
 * keeps the pool's TLS. What the built settings ask of a server is checked on the wire: a
 * server that only records whether the client's first message is PostgreSQL's SSLRequest.
 */

/** The 8 bytes of an SSLRequest: length 8, code 80877103. */
const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);

let server: Server;
let port: number;
const firstMessages: Buffer[] = [];

beforeAll(async () => {
  server = createServer((socket) => {
    socket.once('data', (data) => {
      firstMessages.push(Buffer.from(data.subarray(0, 8)));
      // "N": no TLS here; a client that asked for it gives up, one that did not waits for auth.
      if (data.subarray(0, 8).equals(SSL_REQUEST)) socket.end('N');
      else socket.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** Whether a client with these settings opens with an SSLRequest. */
async function asksForTls(config: ReturnType<typeof dedicatedClientConfig>): Promise<boolean> {
  firstMessages.length = 0;
  const client = new Client(config);
  client.on('error', () => undefined);
  await client.connect().catch(() => undefined);
  await client.end().catch(() => undefined);
  return firstMessages[0].equals(SSL_REQUEST);
}

const listenUrl = () => `postgres://listener@127.0.0.1:${port}/app`;

describe('the listenUrl connection', () => {
  it("keeps the pool's ssl option", async () => {
    const pool = { host: 'pooler.internal', port: 6432, ssl: { rejectUnauthorized: true, ca: 'CA' }, keepAlive: true };
    const config = dedicatedClientConfig(pool, listenUrl(), 'duraflow leader');
    expect(config).toMatchObject({ ssl: { rejectUnauthorized: true, ca: 'CA' }, keepAlive: true, application_name: 'duraflow leader' });
    expect(config).not.toHaveProperty('host');
    expect(await asksForTls(config)).toBe(true);
  });

  it("keeps the TLS of the pool's URL (sslmode)", async () => {
    const config = dedicatedClientConfig({ connectionString: 'postgres://app@pooler.internal:6432/app?sslmode=no-verify' }, listenUrl());
    expect(config.ssl).toEqual({ rejectUnauthorized: false });
    expect(await asksForTls(config)).toBe(true);
  });

  it("follows the listen URL's own sslmode over the pool's", async () => {
    const config = dedicatedClientConfig({ ssl: true }, `${listenUrl()}?sslmode=disable`);
    expect(await asksForTls(config)).toBe(false);
  });

  it('stays without TLS when the pool has none', async () => {
    expect(await asksForTls(dedicatedClientConfig({ host: 'db' }, listenUrl()))).toBe(false);
  });

  it("is the pool's own settings without a listenUrl", () => {
    const pool = { host: 'db', port: 5432, user: 'app', ssl: true };
    expect(dedicatedClientConfig(pool, undefined, 'x')).toEqual({ ...pool, application_name: 'x' });
  });
});
