import { dialUpstream } from './dial.js';
import type { UpstreamTlsConfig } from '../config/tls-config.js';
import { authCommand } from './handshake.js';
import { encodeCommand } from '../resp/encode.js';
import { ReplyFramer } from '../resp/reply-framer.js';
import { ProxyError } from '../errors.js';

export interface OneShotOptions {
  host: string;
  port: number;
  auth: { username: string | null; password: string } | null;
  timeoutMs: number;
  /** 3: HELLO 3 (with AUTH inside) opens the connection, for a RESP3 client's reply. */
  protocol?: 2 | 3;
  /** config.upstreamTls: TLS to the node when enabled (upstream/dial.ts). */
  tls?: UpstreamTlsConfig | null;
}

/**
 * One command on a connection of its own, opened and closed around it: the last reply (copied),
 * or a rejection with the failure. For what must reach a node whose shared links are stuck
 * behind a long script (SCRIPT KILL, FUNCTION KILL, a PING or FUNCTION STATS while a script
 * runs): only AUTH or HELLO (both allowed while busy) precede it — no CLIENT SETNAME, which a
 * busy node refuses.
 */
export function oneShotCommand(options: OneShotOptions, args: ReadonlyArray<string | Buffer | number>): Promise<Buffer> {
  const { host, port, auth, timeoutMs, protocol = 2 } = options;
  const address = `${host}:${port}`;
  return new Promise((resolve, reject) => {
    const commands: Buffer[] = [];
    if (protocol === 3) commands.push(encodeCommand(auth ? ['HELLO', '3', 'AUTH', auth.username ?? 'default', auth.password] : ['HELLO', '3']));
    else if (auth) commands.push(encodeCommand(authCommand(auth)));
    commands.push(encodeCommand(args));
    let owed = commands.length;
    const framer = new ReplyFramer();
    const { socket, openEvent } = dialUpstream(host, port, options.tls);
    const timer = setTimeout(() => finish(new Error(ProxyError.timeout(address, timeoutMs))), timeoutMs);
    const finish = (result: Buffer | Error) => {
      clearTimeout(timer);
      socket.destroy();
      if (result instanceof Error) reject(result);
      else resolve(result);
    };
    socket.once(openEvent, () => socket.write(Buffer.concat(commands)));
    socket.on('error', (err) => finish(new Error(ProxyError.upstreamUnavailable(address, err.message))));
    socket.on('close', () => finish(new Error(ProxyError.connectionLost(address))));
    socket.on('data', (chunk: Buffer) => {
      framer.push(chunk);
      let frame: Buffer | null;
      try {
        while ((frame = framer.next()) !== null) {
          if (--owed > 0) {
            if (frame[0] === 0x2d) return finish(Buffer.from(frame)); // AUTH / HELLO refused: its error is the answer
            continue;
          }
          return finish(Buffer.from(frame));
        }
      } catch (err) {
        finish(new Error(ProxyError.upstreamUnavailable(address, (err as Error).message)));
      }
    });
  });
}
