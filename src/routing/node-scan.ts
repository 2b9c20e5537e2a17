import { bulkPayload, splitAggregate } from '../resp/decode.js';
import { encodeCommand } from '../resp/encode.js';
import { nodeCall } from './internal-call.js';
import type { Router } from './router.js';
import type { CallClient } from './upstream-call.js';
import type { ClusterNode } from '../cluster/topology.js';

/** Keys asked for per SCAN step. */
const SCAN_COUNT = '1000';

/**
 * Every stored key of `pattern` on one primary, handed to `each` one SCAN step at a time (the
 * next step waits for `each`). Stops early when the client goes, or when `each` answers false.
 * A node's error reply is thrown.
 */
export async function scanNode(
  router: Router, client: CallClient, node: ClusterNode, pattern: Buffer,
  each: (keys: Buffer[]) => Promise<boolean | void> | boolean | void,
): Promise<void> {
  let cursor = '0';
  do {
    const reply = await nodeCall(router, client, node, 'primary', encodeCommand(['SCAN', cursor, 'MATCH', pattern, 'COUNT', SCAN_COUNT]), 'scan');
    const parts = reply[0] === 0x2a ? splitAggregate(reply) : null;
    if (parts === null || parts.length !== 2) throw new Error(`SCAN on ${node.address} answered ${reply.toString('latin1', 0, 120).trim()}`);
    cursor = bulkPayload(parts[0]!)?.toString('latin1') ?? '0';
    const keys = (splitAggregate(parts[1]!) ?? []).map((k) => bulkPayload(k)).filter((k): k is Buffer => k !== null);
    if (keys.length > 0 && (await each(keys)) === false) return;
  } while (cursor !== '0' && !client.closed);
}
