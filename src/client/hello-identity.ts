import { decodeReply, type RespValue } from '../resp/decode.js';

/**
 * What HELLO names as the server — `server` and `version` — as the nodes name it in their own HELLO
 * (Valkey answers `redis` / 7.2.4 after CONFIG SET extended-redis-compatibility yes, while its INFO
 * still says valkey). Asked of the first primary at every discovery, and again before the next
 * HELLO once a CONFIG SET of extended-redis-compatibility passed through respool (stale()).
 */
export class HelloIdentity {
  server: string;
  version: string;
  private asking: Promise<void> | null = null;
  private isStale = false;

  /** `ask`: HELLO (no arguments) on a node, its RESP2 reply; `fallback`: the name and version from INFO until asked. */
  constructor(private readonly ask: () => Promise<Buffer>, fallback: { server: string; version: string }) {
    this.server = fallback.server;
    this.version = fallback.version;
  }

  /** The next HELLO waits for the nodes' answer (a setting that changes it went through respool). */
  stale(): void {
    this.isStale = true;
  }

  /** The identity is to be asked again (stale) or is being asked: wait for it. Null when it is known. */
  pending(): Promise<void> | null {
    if (this.isStale) {
      this.isStale = false;
      return this.learn();
    }
    return this.asking;
  }

  /** Asks the nodes (one question at a time). Never rejects: what was known stays on failure. */
  learn(): Promise<void> {
    return (this.asking ??= this.ask()
      .then((frame) => {
        const fields = decodeReply(frame);
        const server = field(fields, 'server');
        const version = field(fields, 'version');
        if (server !== undefined) this.server = server;
        if (version !== undefined) this.version = version;
      }, () => undefined)
      .finally(() => {
        this.asking = null;
      }));
  }
}

function field(reply: RespValue, key: string): string | undefined {
  const text = (v: RespValue) => (Buffer.isBuffer(v) ? v.toString('utf8') : String(v));
  if (reply instanceof Map) {
    for (const [k, v] of reply) if (text(k) === key) return text(v);
    return undefined;
  }
  if (!Array.isArray(reply)) return undefined;
  for (let i = 0; i + 1 < reply.length; i += 2) if (text(reply[i]!) === key) return text(reply[i + 1]!);
  return undefined;
}
