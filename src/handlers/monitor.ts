import { encodeError, encodeSimple } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import type { LinkRequest } from '../upstream/link.js';
import type { DedicatedConnection } from '../upstream/dedicated-connection.js';
import type { Handler } from './types.js';

const MONITOR = Buffer.from('*1\r\n$7\r\nMONITOR\r\n');

/**
 * MONITOR: a leased connection to every node of the upstream, each sent MONITOR; once every node
 * answered +OK the client gets +OK, then every node's lines, merged in arrival order (each line
 * names its node's client address, as Valkey prints it). The leases are closed with the client.
 * A node that fails ends the client's MONITOR with an error, as a lost connection would.
 */
export const monitor: Handler = (session, req) => {
  if (req.args.length !== 1) return session.replyNow(encodeError(ProxyError.wrongArity('monitor')));
  const ctx = session.ctx;
  const topology = ctx.router.topology();
  if (topology === null) return session.replyNow(encodeError(ProxyError.topologyUnknown()));
  const nodes = topology.allNodes();
  const entry = session.reserve();
  const held: DedicatedConnection[] = [];
  let closed = false;
  const endAll = () => {
    closed = true;
    for (const conn of held.splice(0)) ctx.dedicated.release(conn, false);
  };
  session.onClose(endAll);
  let pending = nodes.length;
  const fail = (error: string) => {
    if (entry.reply === null) entry.fill(encodeError(error));
    else session.push(encodeError(error));
    endAll();
  };
  for (const node of nodes) {
    ctx.dedicated.acquire(node.host, node.port, session.state.protocol, 0, session.state.acl.upstream).then(
      (conn) => {
        if (closed) return ctx.dedicated.release(conn, false);
        held.push(conn);
        const request: LinkRequest = {
          sentAt: 0,
          onReply: (frame) => {
            if (frame[0] === 0x2d) return fail(frame.toString('utf8', 1, frame.length - 2));
            conn.onUnsolicited = (line) => session.push(line);
            if (--pending === 0) entry.fill(encodeSimple('OK'));
          },
          onLinkFailure: (error) => fail(error),
        };
        conn.once('close', (reason: string) => {
          if (!closed) fail(ProxyError.monitorLost(conn.address, reason));
        });
        conn.send(MONITOR, request);
      },
      (err: Error) => fail(err.message),
    );
  }
};
