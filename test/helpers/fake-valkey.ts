import net from 'node:net';
import { RequestFramer } from '../../src/resp/request-framer.js';

/**
 * An in-process, fault-injecting stand-in for a Valkey node (for the cases a real server cannot
 * produce on demand). Modes, switchable at any time:
 *  - 'answer'   : +OK to CLIENT/HELLO/READONLY/AUTH, $0 to INFO, +PONG to PING, and for any
 *                 other command a bulk reply echoing its first argument after the name;
 *  - 'handshake-only' : answers the handshake (CLIENT, AUTH, INFO) and nothing else — a black hole
 *                 for data commands on links that look healthy. Like a real node it answers in
 *                 order: once a data command on a connection goes unanswered, nothing after it
 *                 on that connection is answered either (an INFO behind a stuck SET must not
 *                 be answered first, or its reply would be taken for the SET's);
 *  - 'silent'   : accepts connections and never answers anything;
 *  - 'delay'    : like 'answer', each reply after `delayMs`;
 *  - 'deaf'     : like 'handshake-only', and it stops reading at the first data command, so what
 *                 is written to it piles up in the kernel and then in the writer (a congested link).
 */
export type FakeMode = 'answer' | 'handshake-only' | 'silent' | 'delay' | 'deaf';

export interface FakeValkey {
  readonly port: number;
  mode: FakeMode;
  delayMs: number;
  /** Connections accepted so far. */
  connections(): number;
  /** Data (non-handshake) commands received so far. */
  commands(): number;
  close(): Promise<void>;
}

const HANDSHAKE = new Set(['client', 'hello', 'auth', 'readonly', 'info', 'command']);

export async function startFakeValkey(mode: FakeMode = 'answer'): Promise<FakeValkey> {
  let accepted = 0;
  let received = 0;
  const sockets = new Set<net.Socket>();
  const fake: FakeValkey = {
    port: 0,
    mode,
    delayMs: 200,
    connections: () => accepted,
    commands: () => received,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
  const server = net.createServer((socket) => {
    accepted++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    const framer = new RequestFramer();
    let stalled = false; // this connection left a command unanswered: answer nothing after it
    socket.on('data', (chunk: Buffer) => {
      framer.push(chunk);
      for (let frame = framer.next(); frame !== null; frame = framer.next()) {
        const name = frame.args[0]!.toString('latin1').toLowerCase();
        const handshake = HANDSHAKE.has(name);
        if (!handshake) received++;
        if (fake.mode === 'silent' || ((fake.mode === 'handshake-only' || fake.mode === 'deaf') && !handshake)) stalled = true;
        if (stalled && fake.mode === 'deaf') socket.pause();
        if (stalled) continue;
        let reply: Buffer;
        if (name === 'info' || name === 'command') reply = Buffer.from('$0\r\n\r\n');
        else if (name === 'ping') reply = Buffer.from('+PONG\r\n');
        else if (handshake) reply = Buffer.from('+OK\r\n');
        else {
          const arg = frame.args[1] ?? Buffer.alloc(0);
          reply = Buffer.concat([Buffer.from(`$${arg.length}\r\n`), arg, Buffer.from('\r\n')]);
        }
        if (fake.mode === 'delay' && !handshake) setTimeout(() => socket.writable && socket.write(reply), fake.delayMs);
        else socket.write(reply);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  (fake as { port: number }).port = (server.address() as net.AddressInfo).port;
  return fake;
}
