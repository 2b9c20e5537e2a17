// Node's floor for a hop through a proxy: a bare net.Server on 127.0.0.1 that relays every client
// connection byte for byte to one upstream port over a connection of its own (socket.pipe both
// ways, TCP_NODELAY) — no parsing, no pooling. What one extra Node process on the path costs a
// request's latency before a proxy does anything (bench/blocking.mjs's "bare Node relay").
//   node bench/lib/node-relay.mjs LISTEN_PORT UPSTREAM_PORT
import net from 'node:net';

const [listenPort, upstreamPort] = process.argv.slice(2).map(Number);
net.createServer({ noDelay: true }, (client) => {
  const upstream = net.connect({ port: upstreamPort, host: '127.0.0.1', noDelay: true });
  client.pipe(upstream);
  upstream.pipe(client);
  const end = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', end).on('close', end);
  upstream.on('error', end).on('close', end);
}).listen({ port: listenPort, host: '127.0.0.1', backlog: 4096 });
process.on('SIGTERM', () => process.exit(0));
