/**
 * A tiny, self-contained RESP client for the test harness, the demo and the benches.
 *
 * It is deliberately independent of the proxy's own modules (resp/, upstream/): the harness must
 * work while those are being written, and a test must not use the code under test as its oracle.
 * Not for the hot path: replies are fully decoded, and the decoder re-parses a partial reply from
 * its start when more bytes arrive (fine for harness-sized replies).
 *
 * Decoding (RESP2 and RESP3):
 *   simple / bulk / verbatim string → string (utf8; verbatim loses its "txt:" prefix)
 *   integer → number (bigint beyond Number.MAX_SAFE_INTEGER), double → number, big number → bigint
 *   null bulk / null array / RESP3 null → null, boolean → boolean
 *   array / set / push → array, map → Map
 *   error / blob error → ReplyError (an Error, returned as a value, never thrown by `call`)
 *   attributes (`|`) are skipped.
 */
import net from 'node:net';
import tls from 'node:tls';

export class ReplyError extends Error {
  /** The first word of the error reply, e.g. "MOVED", "ERR", "NOAUTH". */
  readonly code: string;
  constructor(message: string) {
    super(message);
    this.name = 'ReplyError';
    const space = message.indexOf(' ');
    this.code = space === -1 ? message : message.slice(0, space);
  }
}

export type RespReply =
  | string
  | number
  | bigint
  | boolean
  | null
  | ReplyError
  | RespReply[]
  | Map<RespReply, RespReply>;

export type RespArg = string | number | Buffer;

/** Encodes one command as a RESP array of bulk strings. */
export function encodeCommand(args: readonly RespArg[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const arg of args) {
    const b = Buffer.isBuffer(arg) ? arg : Buffer.from(String(arg), 'utf8');
    parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from('\r\n'));
  }
  return Buffer.concat(parts);
}

const INCOMPLETE = Symbol('incomplete');
const ATTRIBUTE = Symbol('attribute');

/** Streaming decoder: push() bytes, then next() until it returns undefined. */
export class RespDecoder {
  private buf: Buffer = Buffer.alloc(0);
  private pos = 0;

  push(chunk: Buffer): void {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
  }

  /** The next complete reply, or undefined when more bytes are needed. */
  next(): RespReply | undefined {
    return this.nextFrame()?.reply;
  }

  /**
   * The next complete reply with the exact bytes it arrived as (`raw`: a view, valid after later
   * pushes; a top-level attribute belongs to the frame of the reply it annotates), or undefined
   * when more bytes are needed.
   */
  nextFrame(): { reply: RespReply; raw: Buffer } | undefined {
    if (this.buf.length === 0) return undefined;
    this.pos = 0;
    let reply: RespReply;
    try {
      reply = this.parseValue(); // skips attributes, so a frame may start with one
    } catch (e) {
      if (e === INCOMPLETE) return undefined;
      throw e;
    }
    const raw = this.buf.subarray(0, this.pos);
    this.buf = this.pos >= this.buf.length ? Buffer.alloc(0) : this.buf.subarray(this.pos);
    return { reply, raw };
  }

  private line(): string {
    const end = this.buf.indexOf('\r\n', this.pos, 'latin1');
    if (end === -1) throw INCOMPLETE;
    const s = this.buf.toString('utf8', this.pos, end);
    this.pos = end + 2;
    return s;
  }

  private blob(len: number): string {
    if (this.pos + len + 2 > this.buf.length) throw INCOMPLETE;
    const s = this.buf.toString('utf8', this.pos, this.pos + len);
    this.pos += len + 2;
    return s;
  }

  private parseValue(): RespReply {
    for (;;) {
      const v = this.parse();
      if (v !== ATTRIBUTE) return v;
    }
  }

  private parse(): RespReply | typeof ATTRIBUTE {
    if (this.pos >= this.buf.length) throw INCOMPLETE;
    const type = String.fromCharCode(this.buf[this.pos]!);
    this.pos++;
    switch (type) {
      case '+':
        return this.line();
      case '-':
        return new ReplyError(this.line());
      case ':': {
        const s = this.line();
        const n = Number(s);
        return Number.isSafeInteger(n) ? n : BigInt(s);
      }
      case '$': {
        const len = Number(this.line());
        return len < 0 ? null : this.blob(len);
      }
      case '*':
      case '~':
      case '>': {
        const len = Number(this.line());
        if (len < 0) return null;
        const out: RespReply[] = [];
        for (let i = 0; i < len; i++) out.push(this.parseValue());
        return out;
      }
      case '%': {
        const len = Number(this.line());
        const out = new Map<RespReply, RespReply>();
        for (let i = 0; i < len; i++) {
          const k = this.parseValue();
          out.set(k, this.parseValue());
        }
        return out;
      }
      case '|': {
        const len = Number(this.line());
        for (let i = 0; i < len * 2; i++) this.parseValue();
        return ATTRIBUTE;
      }
      case '_':
        this.line();
        return null;
      case '#':
        return this.line() === 't';
      case ',': {
        const s = this.line();
        if (s === 'inf') return Infinity;
        if (s === '-inf') return -Infinity;
        return Number(s);
      }
      case '(':
        return BigInt(this.line());
      case '!':
        return new ReplyError(this.blob(Number(this.line())));
      case '=': {
        const s = this.blob(Number(this.line()));
        return s.length >= 4 && s[3] === ':' ? s.slice(4) : s;
      }
      default:
        throw new Error(`RESP protocol error: unexpected type byte ${JSON.stringify(type)}`);
    }
  }
}

export interface RawClientOptions {
  host?: string;
  /** Sent as AUTH [username] password right after connecting. */
  password?: string;
  username?: string;
  /** Connect timeout (ms). Default 2000. */
  connectTimeoutMs?: number;
  /** Per-command reply timeout (ms); 0 disables. Default 10000. */
  timeoutMs?: number;
  /** Connect over TLS with these options (ca, cert, key, servername, …); commands wait for the handshake. */
  tls?: tls.ConnectionOptions;
}

interface Pending {
  resolve: (v: RespReply) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout | undefined;
}

/**
 * One socket, pipelined commands, replies matched FIFO. Error replies resolve as ReplyError values;
 * the promise rejects only on connection failure, timeout or close.
 */
export class RawClient {
  private readonly decoder = new RespDecoder();
  private readonly pending: Pending[] = [];
  private closedError: Error | undefined;
  /** Replies that arrived with no command waiting (e.g. pub/sub messages). */
  readonly unsolicited: RespReply[] = [];

  private constructor(
    readonly socket: net.Socket,
    private readonly timeoutMs: number,
  ) {
    socket.on('data', (chunk: Buffer) => {
      this.decoder.push(chunk);
      for (;;) {
        let reply: RespReply | undefined;
        try {
          reply = this.decoder.next();
        } catch (e) {
          this.fail(e as Error);
          socket.destroy();
          return;
        }
        if (reply === undefined) return;
        const p = this.pending.shift();
        if (p === undefined) {
          this.unsolicited.push(reply);
          continue;
        }
        if (p.timer) clearTimeout(p.timer);
        p.resolve(reply);
      }
    });
    socket.on('error', (e) => this.fail(e));
    socket.on('close', () => this.fail(new Error('connection closed')));
  }

  static async connect(port: number, opts: RawClientOptions = {}): Promise<RawClient> {
    const host = opts.host ?? '127.0.0.1';
    const connectTimeoutMs = opts.connectTimeoutMs ?? 2000;
    const socket = await new Promise<net.Socket>((resolve, reject) => {
      const s: net.Socket = opts.tls ? tls.connect({ host, port, ...opts.tls }) : net.connect({ host, port });
      s.setNoDelay(true);
      const timer = setTimeout(() => {
        s.destroy();
        reject(new Error(`connect to ${host}:${port} timed out after ${connectTimeoutMs} ms`));
      }, connectTimeoutMs);
      s.once(opts.tls ? 'secureConnect' : 'connect', () => {
        clearTimeout(timer);
        s.removeAllListeners('error');
        resolve(s);
      });
      s.once('error', (e) => {
        clearTimeout(timer);
        s.destroy();
        reject(e);
      });
    });
    const client = new RawClient(socket, opts.timeoutMs ?? 10_000);
    if (opts.password !== undefined) {
      const auth = opts.username !== undefined ? ['AUTH', opts.username, opts.password] : ['AUTH', opts.password];
      const r = await client.call(...auth);
      if (r instanceof ReplyError) {
        client.close();
        throw r;
      }
    }
    return client;
  }

  /** Sends one command; resolves with its decoded reply (error replies as ReplyError values). */
  call(...args: RespArg[]): Promise<RespReply> {
    if (this.closedError) return Promise.reject(this.closedError);
    return new Promise<RespReply>((resolve, reject) => {
      const p: Pending = { resolve, reject, timer: undefined };
      if (this.timeoutMs > 0) {
        p.timer = setTimeout(() => {
          this.fail(new Error(`timeout after ${this.timeoutMs} ms waiting for reply to ${String(args[0])}`));
          this.socket.destroy();
        }, this.timeoutMs);
      }
      this.pending.push(p);
      this.socket.write(encodeCommand(args));
    });
  }

  /** Like call(), but a top-level error reply rejects. */
  async command(...args: RespArg[]): Promise<RespReply> {
    const r = await this.call(...args);
    if (r instanceof ReplyError) throw r;
    return r;
  }

  get closed(): boolean {
    return this.closedError !== undefined;
  }

  close(): void {
    this.fail(new Error('client closed'));
    this.socket.destroy();
  }

  private fail(e: Error): void {
    if (!this.closedError) this.closedError = e;
    for (const p of this.pending.splice(0)) {
      if (p.timer) clearTimeout(p.timer);
      p.reject(this.closedError);
    }
  }
}

/** Connects, sends one command, returns its reply, closes. */
export async function rawCall(port: number, args: RespArg[], opts: RawClientOptions = {}): Promise<RespReply> {
  const c = await RawClient.connect(port, opts);
  try {
    return await c.call(...args);
  } finally {
    c.close();
  }
}

/** Connects, pipelines several commands, returns their replies in order, closes. */
export async function rawPipeline(port: number, commands: RespArg[][], opts: RawClientOptions = {}): Promise<RespReply[]> {
  const c = await RawClient.connect(port, opts);
  try {
    return await Promise.all(commands.map((cmd) => c.call(...cmd)));
  } finally {
    c.close();
  }
}

/** Parses an INFO reply ("key:value" lines) into a record. */
export function parseInfo(text: RespReply): Record<string, string> {
  const out: Record<string, string> = {};
  if (typeof text !== 'string') return out;
  for (const line of text.split(/\r?\n/)) {
    if (line === '' || line.startsWith('#')) continue;
    const i = line.indexOf(':');
    if (i > 0) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}
