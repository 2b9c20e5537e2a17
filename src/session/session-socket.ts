import type { Socket } from 'node:net';
import { readClientSocket } from './shared-reads.js';

/** What a client socket's events go to (client-session.ts). */
export interface SocketEvents {
  socketData(chunk: Buffer): void;
  socketEnd(): void;
  socketClosed(): void;
  socketIdle(): void;
}

/**
 * A client socket's listeners without a closure per session (a connection storm, idle clients
 * cost a session's objects only): the listeners are shared functions that find the session
 * under SESSION on the socket (`this` is the socket).
 */
const SESSION = Symbol('respool.session');
type SessionSocket = Socket & { [SESSION]: SocketEvents };

function onSocketData(this: Socket, chunk: Buffer): void {
  (this as SessionSocket)[SESSION].socketData(chunk);
}

function onSocketEnd(this: Socket): void {
  (this as SessionSocket)[SESSION].socketEnd();
}

function onSocketClose(this: Socket): void {
  (this as SessionSocket)[SESSION].socketClosed();
}

function onSocketTimeout(this: Socket): void {
  (this as SessionSocket)[SESSION].socketIdle();
}

/** 'close' follows an error; a client's reset is not respool's error. */
function ignoreSocketError(): void {}

/**
 * The accepted socket, reading through the shared buffer where it can (shared-reads.ts), its
 * events going to `session`; `idleTimeoutMs` > 0: 'timeout' after that long without traffic.
 */
export function sessionSocket(accepted: Socket, session: SocketEvents, idleTimeoutMs: number): Socket {
  const socket = readClientSocket(accepted, onSocketData);
  (socket as SessionSocket)[SESSION] = session;
  if (idleTimeoutMs > 0) {
    socket.setTimeout(idleTimeoutMs);
    socket.on('timeout', onSocketTimeout);
  }
  socket.on('end', onSocketEnd);
  socket.on('close', onSocketClose);
  socket.on('error', ignoreSocketError);
  return socket;
}

/**
 * Takes the session's listeners off a TLS socket (a 'data' listener: TLS does not read through
 * the shared buffer) for a takeover's relay (tls-relay.ts), which reads it from then on.
 */
export function releaseSessionSocket(socket: Socket): void {
  socket.off('data', onSocketData).off('end', onSocketEnd).off('close', onSocketClose).off('timeout', onSocketTimeout).off('error', ignoreSocketError);
}

/** "ip:port" of the client's end (`remote`) or respool's (`local`); a Unix socket client has no address: Valkey shows the socket's path and port 0. */
export function socketAddress(socket: Socket, end: 'remote' | 'local', unixSocket: string | null | undefined): string {
  const ip = end === 'remote' ? socket.remoteAddress : socket.localAddress;
  if (ip === undefined) return `${unixSocket ?? ''}:0`;
  return `${ip}:${end === 'remote' ? socket.remotePort : socket.localPort}`;
}
