import { encodeCommand } from '../resp/encode.js';
import type { Router } from './router.js';
import { UpstreamCall, type CallClient } from './upstream-call.js';

/**
 * A command respool sends on its own for a client's command over several slots (a probe, a
 * pop, a value put back, a copy): on the client's shared link to the slot's primary, following
 * MOVED/ASK and retries like any call, but neither counted as the client's command nor offered
 * to the keyed hook. Resolves with the reply (copied); a link failure resolves with its error
 * reply too, so callers read every outcome as a reply. `readOnly`: may be re-sent after a lost
 * link (it changes nothing).
 */
export function internalCall(router: Router, client: CallClient, args: ReadonlyArray<Buffer | string>, slot: number, readOnly = false): Promise<Buffer> {
  return new Promise((resolve) => {
    const call = new UpstreamCall({ client, onCallDone: (reply) => resolve(Buffer.from(reply)) }, router, encodeCommand(args), String(args[0]).toLowerCase(), slot);
    call.safeToRepeat = readOnly;
    router.dispatch(call);
  });
}
