// A bare Node.js server that answers every request chunk with +PONG: the floor of what Node costs
// per request at pipeline 1, for bench/request-floor.mjs. Three ways to read and write:
//   data   : 'data' events and socket.write (the stream API every Node server uses)
//   onread : one shared read buffer (net.Socket's onread, as respool's client sockets) + socket.write
//   handle : onread + writes straight to the socket's libuv handle, past the Writable stream. It
//            uses process.binding('stream_wrap') (internal): what the stream layer costs; respool's
//            writes take this path too (src/util/direct-write.ts).
//   node bench/lib/pong-server.mjs PORT MODE
import net from 'node:net';

const PONG = Buffer.from('+PONG\r\n');
const port = Number(process.argv[2]);
const mode = process.argv[3] ?? 'data';
const shared = Buffer.allocUnsafe(64 * 1024);
const WriteWrap = mode === 'handle' ? process.binding('stream_wrap').WriteWrap : null;

const server = net.createServer({ noDelay: true, pauseOnConnect: mode !== 'data' }, (accepted) => {
  accepted.on('error', () => {});
  if (mode === 'data') {
    accepted.on('data', () => accepted.write(PONG));
    return;
  }
  // Re-wrap the accepted handle with onread, as src/session/shared-reads.ts does.
  const handle = accepted._handle;
  accepted._handle = null;
  const socket = new net.Socket({
    handle,
    readable: true,
    writable: true,
    onread: {
      buffer: shared,
      callback: () => {
        if (WriteWrap === null) {
          socket.write(PONG);
          return;
        }
        const req = new WriteWrap();
        req.handle = handle;
        req.oncomplete = () => {};
        req.async = false;
        req.bytes = 0;
        req.buffer = null;
        handle.writeBuffer(req, PONG);
      },
    },
  });
  socket.on('error', () => {});
  socket.resume();
});
server.listen({ port, host: '127.0.0.1' });
process.on('SIGTERM', () => process.exit(0));
