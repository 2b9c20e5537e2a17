import { decodeReply } from '../resp/decode.js';
import { NodeConnection, type HandshakeStep, type NodeConnectionOptions } from './node-connection.js';

export interface LeasedConnectionOptions extends Omit<NodeConnectionOptions, 'clientName' | 'load'> {
  /** CLIENT SETNAME of the upstream connection; default "respool-lease". */
  clientName?: string;
}

/** The `id` of a HELLO reply (a map in RESP3, a flat array in RESP2), or null. */
function helloClientId(frame: Buffer): number | null {
  const reply = decodeReply(frame);
  const entries: Array<[unknown, unknown]> = reply instanceof Map ? [...reply] : [];
  if (Array.isArray(reply)) for (let i = 0; i + 1 < reply.length; i += 2) entries.push([reply[i], reply[i + 1]]);
  for (const [k, v] of entries) {
    if (String(k) === 'id') {
      const id = Number(v);
      return Number.isSafeInteger(id) ? id : null;
    }
  }
  return null;
}

/** The name leased connections give themselves upstream (CLIENT LIST shows it). */
export const LEASE_CLIENT_NAME = 'respool-lease';

const COLON = 0x3a; // ':'

/**
 * A leased connection: one pipelined connection to one node (node-connection.ts), leased to one
 * client at a time (WATCH … EXEC, a blocking command, tracking lanes, MONITOR). It has no command
 * timeout of its own — BLPOP k 0 may wait for ever; the lease holder bounds the wait with
 * setDeadline() when it wants one. Its handshake ends with its node-side client id (CLIENT ID,
 * or HELLO's `id` for a user's identity, which may not run CLIENT ID): what CLIENT UNBLOCK needs.
 *
 * Events: 'ready'; 'settled' (a reply emptied the in-flight FIFO); 'close' (reason: string).
 */
export class LeasedConnection extends NodeConnection {
  /** The upstream's CLIENT ID for this connection; -1 until ready. */
  clientId = -1;
  /**
   * The database the connection is in: options.db after the handshake; a lease holder that
   * forwards SELECT on it sets what the server answered (handlers/watch-lane.ts), so that the
   * pool closes, rather than reuses, a connection handed back in another database.
   */
  db: number;

  constructor(options: LeasedConnectionOptions) {
    super({ ...options, clientName: options.clientName ?? LEASE_CLIENT_NAME });
    this.db = options.db ?? 0;
    this.onSettled = () => this.emit('settled');
  }

  protected override handshakeSteps(): HandshakeStep[] {
    const steps = super.handshakeSteps();
    if (this.options.identity === true) {
      // HELLO's reply holds the client id.
      steps[0]!.onReply = (frame) => {
        const id = helloClientId(frame);
        if (id === null) this.fail(`handshake HELLO: no client id in ${JSON.stringify(frame.toString('latin1', 0, 40))}`);
        else this.clientId = id;
      };
      return steps;
    }
    steps.push({
      args: ['CLIENT', 'ID'],
      onReply: (frame) => {
        const id = frame[0] === COLON ? Number(frame.toString('latin1', 1, frame.length - 2)) : NaN;
        if (!Number.isSafeInteger(id)) this.fail(`handshake CLIENT ID: unexpected reply ${JSON.stringify(frame.toString('latin1', 0, 40))}`);
        else this.clientId = id;
      },
    });
    return steps;
  }
}
