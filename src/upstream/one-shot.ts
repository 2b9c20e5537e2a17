import net from 'node:net';
import { authCommand } from './handshake.js';
import { encodeCommand } from '../resp/encode.js';
import { ReplyFramer } from '../resp/reply-framer.js';
import { ProxyError } from '../errors.js';

export interface OneShotOptions {
  host: string;
  port: number;
  auth: { username: string | null; password: string } | null;
  timeoutMs: number;
}

/**
 * One command on a connection of its own, opened and closed around it: the last reply (copied),
 * or a rejection with the failure. For what must reach a node whose shared links are stuck
 * behind a long script (SCRIPT KILL, FUNCTION KILL): only AUTH (allowed while busy) precedes
 * it — no CLIENT SETNAME, which a busy node refuses.
 */
export function oneShotCommand(options: OneShotOptions, args: ReadonlyArray<string | Buffer | number>): Promise<Buffer> {
  const { host, port, auth, timeoutMs } = options;
  const address = `${host}:${port}`;
  return new Promise((resolve, reject) => {
    const commands: Buffer[] = [];
    if (auth) commands.push(encodeCommand(authCommand(auth)));
    commands.push(encodeCommand(args));
    let owed = commands.length;
    const framer = new ReplyFramer();
    const socket = net.connect({ host, port, noDelay: true });
    const timer = setTimeout(() => finish(new Error(ProxyError.timeout(address, timeoutMs))), timeoutMs);
    const finish = (result: Buffer | Error) => {
      clearTimeout(timer);
      socket.destroy();
      if (result instanceof Error) reject(result);
      else resolve(result);
    };
    socket.on('connect', () => socket.write(Buffer.concat(commands)));
    socket.on('error', (err) => finish(new Error(ProxyError.upstreamUnavailable(address, err.message))));
    socket.on('close', () => finish(new Error(ProxyError.connectionLost(address))));
    socket.on('data', (chunk: Buffer) => {
      framer.push(chunk);
      let frame: Buffer | null;
      try {
        while ((frame = framer.next()) !== null) {
          if (--owed > 0) {
            if (frame[0] === 0x2d) return finish(Buffer.from(frame)); // AUTH refused: its error is the answer
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
