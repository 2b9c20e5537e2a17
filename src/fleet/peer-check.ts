import net from 'node:net';
import { ReplyFramer } from '../resp/reply-framer.js';
import { decodeReply, RespError } from '../resp/decode.js';
import { encodeCommand } from '../resp/encode.js';
import type { HostPort } from '../config/types.js';

/** What one check of a peer found. */
export type CheckOutcome =
  | { ok: true }
  /** refused: the address answers but nothing listens (the process is gone or draining). */
  | { ok: false; refused: boolean; error: string };

const MYID = encodeCommand(['CLUSTER', 'MYID']);

/**
 * One fleet member's health check, on its announce address (the port its cluster clients use):
 * one kept connection, `CLUSTER MYID` per check, each with its own deadline. The reply must be
 * the id the member derives from that address (fleet/cluster-emulation.ts nodeId), so an address that
 * reaches something else — a restarted pod's IP reused by another service, a member announcing
 * another address — does not count as the member. An error reply (NOAUTH or NOPERM: respool's
 * users are configured and the check does not AUTH) still proves a respool is answering there.
 *
 * A closed connection is dialed again by the next check; a refused dial is reported as such, so
 * a killed member is known dead at once rather than after its checks time out.
 */
export class PeerCheck {
  private socket: net.Socket | null = null;
  private framer = new ReplyFramer();
  private waiter: ((reply: Buffer | Error) => void) | null = null;
  private closed = false;

  constructor(
    readonly peer: HostPort,
    private readonly expectedId: string,
    /** The kept connection closed between checks (a killed member): check again soon. */
    private readonly onDisconnect: () => void = () => {},
  ) {}

  /** One check, settled within timeoutMs. Never two at once (the caller spaces them). */
  async check(timeoutMs: number): Promise<CheckOutcome> {
    if (this.closed) return { ok: false, refused: false, error: 'stopped' };
    const deadline = Date.now() + timeoutMs;
    let socket: net.Socket;
    try {
      socket = this.socket ?? (await this.dial(timeoutMs));
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      return { ok: false, refused: e.code === 'ECONNREFUSED', error: e.message };
    }
    const left = Math.max(1, deadline - Date.now());
    let reply: Buffer | Error;
    try {
      reply = await new Promise<Buffer | Error>((resolve) => {
        const timer = setTimeout(() => {
          this.waiter = null;
          resolve(new Error(`no answer within ${timeoutMs} ms`));
        }, left);
        this.waiter = (r) => {
          clearTimeout(timer);
          this.waiter = null;
          resolve(r);
        };
        socket.write(MYID);
      });
    } finally {
      this.waiter = null;
    }
    if (reply instanceof Error) {
      // A late answer would be matched to the next check: start over on a new connection.
      this.drop();
      return { ok: false, refused: false, error: reply.message };
    }
    const value = decodeReply(reply);
    if (value instanceof RespError) {
      return /^(NOAUTH|NOPERM|WRONGPASS)/.test(value.message) ? { ok: true } : { ok: false, refused: false, error: `CLUSTER MYID answered ${value.message}` };
    }
    const id = Buffer.isBuffer(value) ? value.toString('latin1') : String(value);
    if (id !== this.expectedId) {
      return { ok: false, refused: false, error: `it answers as node ${id}, not as ${this.expectedId}: its cluster.announce is not ${this.peer.host}:${this.peer.port}` };
    }
    return { ok: true };
  }

  close(): void {
    this.closed = true;
    this.drop();
  }

  private dial(timeoutMs: number): Promise<net.Socket> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: this.peer.host, port: this.peer.port, noDelay: true });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`connect timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeListener('error', onDialError);
        if (this.closed) {
          socket.destroy();
          reject(new Error('stopped'));
          return;
        }
        this.attach(socket);
        resolve(socket);
      });
      const onDialError = (err: Error) => {
        clearTimeout(timer);
        reject(err);
      };
      socket.once('error', onDialError);
    });
  }

  private attach(socket: net.Socket): void {
    this.socket = socket;
    this.framer = new ReplyFramer();
    socket.setKeepAlive(true, 10_000);
    socket.on('data', (chunk: Buffer) => {
      this.framer.push(chunk);
      let frame: Buffer | null;
      try {
        frame = this.framer.next();
      } catch {
        this.drop();
        return;
      }
      while (frame !== null) {
        this.waiter?.(Buffer.from(frame));
        frame = this.framer.next();
      }
    });
    const gone = () => {
      if (this.socket !== socket) return;
      this.socket = null;
      if (this.waiter !== null) this.waiter(new Error('connection closed'));
      else if (!this.closed) this.onDisconnect();
    };
    socket.on('error', gone);
    socket.on('close', gone);
  }

  private drop(): void {
    const s = this.socket;
    this.socket = null;
    s?.destroy();
  }
}
