import type { Socket } from 'node:net';

/**
 * Batches socket writes: the first write in a turn of the event loop corks the socket, and
 * one setImmediate uncorks every corked socket, so everything written while the poll phase
 * handled its I/O callbacks (many clients' requests, many replies) leaves in one writev.
 * A socket that has buffered more than FLUSH_THRESHOLD is uncorked at once so big pipelines
 * do not wait.
 */
const FLUSH_THRESHOLD = 64 * 1024;

const corked = new Set<Socket>();
let scheduled = false;

function flushAll(): void {
  scheduled = false;
  for (const socket of corked) socket.uncork();
  corked.clear();
}

export function batchedWrite(socket: Socket, data: Buffer): void {
  if (!corked.has(socket)) {
    socket.cork();
    corked.add(socket);
    if (!scheduled) {
      scheduled = true;
      setImmediate(flushAll);
    }
  }
  socket.write(data);
  if (socket.writableLength > FLUSH_THRESHOLD) {
    corked.delete(socket);
    socket.uncork();
  }
}

/** Drops a socket that is going away from the batch (uncorking a destroyed socket is harmless). */
export function forgetSocket(socket: Socket): void {
  corked.delete(socket);
}
