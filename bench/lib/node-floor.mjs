// Node's floor for a connection storm: a bare net.Server on 127.0.0.1 that answers every request
// chunk with +PONG and closes when the client does — what a connect + PING + close costs any
// Node.js server on this machine, before a proxy does anything (bench/storm.mjs's "node floor").
//   node bench/lib/node-floor.mjs PORT
import net from 'node:net';

const PONG = Buffer.from('+PONG\r\n');
net.createServer({ noDelay: true }, (socket) => {
  socket.on('data', () => socket.write(PONG));
  socket.on('end', () => socket.destroy());
  socket.on('error', () => {});
}).listen({ port: Number(process.argv[2]), host: '127.0.0.1', backlog: 4096 });
process.on('SIGTERM', () => process.exit(0));
