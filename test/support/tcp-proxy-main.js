'use strict';
/**
 * A TCP proxy in a process of its own (see tcp-proxy.ts): listens on 127.0.0.1:<port> and
 * pipes every connection to <target-host>:<target-port>. Killing this process drops every
 * proxied connection at once, as a network outage or a server crash would.
 *
 * argv: <listen-port> <target-host> <target-port>
 * IPC to the parent: { type: 'listening', port } once it accepts connections, or
 * { type: 'error', code, message } (then it exits: code 98 when the port is taken, else 1).
 * It exits by itself when the parent goes away (IPC channel closed): it never outlives the test.
 */
const net = require('node:net');

const [listenPort, targetHost, targetPort] = process.argv.slice(2);

function send(message) {
  if (process.connected) process.send(message);
}

const sockets = new Set();

const server = net.createServer((client) => {
  const upstream = net.connect({ host: targetHost, port: Number(targetPort) });
  sockets.add(client);
  sockets.add(upstream);
  const close = () => {
    client.destroy();
    upstream.destroy();
    sockets.delete(client);
    sockets.delete(upstream);
  };
  client.setNoDelay(true);
  upstream.setNoDelay(true);
  client.pipe(upstream);
  upstream.pipe(client);
  client.on('error', close);
  upstream.on('error', close);
  client.on('close', close);
  upstream.on('close', close);
});

/** The exit code that says "the port is taken" even if the IPC message is lost (98 = EADDRINUSE on Linux). */
const EXIT_ADDRESS_IN_USE = 98;

server.on('error', (error) => {
  send({ type: 'error', code: error.code, message: error.message });
  process.exitCode = error.code === 'EADDRINUSE' ? EXIT_ADDRESS_IN_USE : 1;
  // Let the IPC message go out before exiting.
  if (process.connected) process.disconnect();
  setImmediate(() => process.exit());
});

server.listen({ port: Number(listenPort), host: '127.0.0.1', exclusive: true }, () => {
  send({ type: 'listening', port: server.address().port });
});

process.on('disconnect', () => process.exit());
process.on('SIGTERM', () => {
  for (const socket of sockets) socket.destroy();
  process.exit(0);
});
