import { encodeCommand } from '../resp/encode.js';
import type { Router } from './router.js';
import { UpstreamCall, type CallClient } from './upstream-call.js';
import type { ClusterNode } from '../cluster/topology.js';

/**
 * A command respool sends on its own for a client's command over several slots (a probe, a
 * pop, a value put back, a copy): on the client's shared link to the slot's primary, following
 * MOVED/ASK and retries like any call, but neither counted as the client's command nor offered
 * to the keyed hook. Resolves with the reply (copied); a link failure resolves with its error
 * reply too, so callers read every outcome as a reply. `readOnly`: may be re-sent after a lost
 * link (it changes nothing). It runs as respool's own user even for a client with an upstream
 * identity (UpstreamCall.asRespool): it touches only the keys the client's command named, which
 * respool checked, and a user's rules need not allow respool's probes and copies.
 */
export function internalCall(router: Router, client: CallClient, args: ReadonlyArray<Buffer | string>, slot: number, readOnly = false): Promise<Buffer> {
  return new Promise((resolve) => {
    const call = new UpstreamCall({ client, onCallDone: (reply) => resolve(Buffer.from(reply)) }, router, encodeCommand(args), String(args[0]).toLowerCase(), slot);
    call.safeToRepeat = readOnly;
    call.asRespool = true;
    router.send({ to: 'call', call });
  });
}

/** One command to one named node (pinned: not redirected, not retried), for the client; its reply, copied. */
export function nodeCall(router: Router, client: CallClient, node: ClusterNode, role: 'primary' | 'replica', raw: Buffer, command: string): Promise<Buffer> {
  return new Promise((resolve) => {
    router.send({ to: 'node', owner: { client, onCallDone: (reply) => resolve(Buffer.from(reply)) }, raw, command, node, role });
  });
}

/**
 * The client as respool's own user: for a block respool writes for its own purposes (the
 * copies a read over several slots computes on, handlers/cross-slot/reads.ts), which a user's
 * identity may not be allowed to write.
 */
export function asRespoolClient(client: CallClient): CallClient {
  return {
    get id() {
      return client.id;
    },
    get protocol() {
      return client.protocol;
    },
    get db() {
      return client.db;
    },
    get closed() {
      return client.closed;
    },
    identity: null,
  };
}
