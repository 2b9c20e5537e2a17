// Node's floor for a connection-per-request client: a bare net.Server on 127.0.0.1 that answers
// AUTH with +OK and GET with the bench's value, and closes when the client does — what connect +
// AUTH + GET + close costs any Node.js sidecar before it forwards anything (bench/conn-per-request-tls.mjs).
// It reads whole small requests and answers each request by its command name's first letter.
//   node bench/lib/node-floor-kv.mjs PORT
import net from 'node:net';

const OK = Buffer.from('+OK\r\n');
const VALUE = Buffer.from('$5\r\nvalue\r\n');
const PONG = Buffer.from('+PONG\r\n');
net.createServer({ noDelay: true }, (socket) => {
  socket.on('data', (chunk) => {
    // Requests are small RESP arrays ("*2\r\n$4\r\nAUTH…"); each chunk holds whole ones here.
    for (let at = chunk.indexOf(0x2a); at !== -1; at = chunk.indexOf(0x2a, at + 1)) {
      const name = chunk.indexOf(0x0a, chunk.indexOf(0x0a, at) + 1) + 1; // after "*N\r\n$L\r\n"
      const c = chunk[name] | 0x20;
      socket.write(c === 0x61 /* a */ ? OK : c === 0x67 /* g */ ? VALUE : PONG);
    }
  });
  socket.on('end', () => socket.destroy());
  socket.on('error', () => {});
}).listen({ port: Number(process.argv[2]), host: '127.0.0.1', backlog: 4096 });
process.on('SIGTERM', () => process.exit(0));
