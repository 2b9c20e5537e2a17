import { encodeError, encodeInteger } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { BlockingCall } from './blocking-call.js';
import { blockingCrossSlot } from './cross-slot/blocking-pops.js';
import { commandTimeoutMs } from './blocking-timeout.js';
import { parkedPop } from './blocking-park.js';
import { PARKABLE_POPS } from '../parking/pop-forms.js';
import type { Handler, HandlerSession } from '../client/handler-session.js';

/**
 * Blocking commands. The list and sorted-set pops (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP,
 * BZPOPMIN/MAX, BZMPOP) over keys of one slot are parked at respool (blocking-park.ts; off with
 * dedicated.parkPops: false). XREAD … BLOCK, XREADGROUP … BLOCK (a consumer is a connection's) and
 * the pops when parking is off run on a leased connection of their own (blocking-call.ts): a
 * shared link must never wait on one client's command.
 *
 *  - Lane switch = barrier: the command starts once the client's earlier replies are written, and
 *    its later pipelined commands wait behind its reply, as they would on Valkey.
 *  - A client that disconnects while blocked: the pool unblocks the connection (CLIENT UNBLOCK
 *    by its id) and reuses it, or closes it.
 *  - Keys in several slots: cross-slot/blocking-pops.ts waits on every slot's primary at once.
 */
export const blocking: Handler = (session, req) => {
  if (req.command === 'client|unblock') return clientUnblock(session, req);
  const ctx = session.ctx;
  const slot = ctx.router.slotOf(req.spec, req.args, ctx.commands());
  if (typeof slot !== 'number') {
    // Keys in several slots: carried out over every slot involved (cross-slot/blocking-pops.ts).
    if (ctx.isCluster() && blockingCrossSlot(session, req)) return;
    return session.replyNow(slot); // CROSSSLOT (a command respool cannot split), topology unknown
  }
  const keyIndexes = req.spec === undefined ? [] : ctx.commands().keyIndexes(req.spec, req.args);
  const timeoutMs = commandTimeoutMs(session, req);
  if (PARKABLE_POPS.has(req.command) && ctx.config.dedicated.parkPops && keyIndexes.length > 0) return parkedPop(session, req, slot, keyIndexes, timeoutMs);
  const raw = Buffer.from(req.raw);
  const keys = keyIndexes.map((i) => req.args[i]!.toString('latin1'));
  const onNoKey = req.command === 'xreadgroup';
  session.runExclusive(() => {
    const entry = session.reserve();
    ctx.metrics?.commandCounter(req.command).inc();
    const state = session.state;
    const call = new BlockingCall(session, raw, req.command, slot, timeoutMs, (reply) => {
      if (state.lease === lease) state.lease = null;
      state.unblock();
      if (call.upstream !== null) entry.upstreamTimed(call.upstream.node, call.upstream.ms); // its wait, left out of the slow log
      entry.fill(reply ?? encodeError(ProxyError.shuttingDown()));
    });
    const lease = { abandon: () => call.abandon(), unblock: (how: 'timeout' | 'error') => call.unblock(how) };
    state.lease = lease;
    state.block(keys, onNoKey); // INFO clients counts it from now
    call.start();
  });
};

/**
 * CLIENT UNBLOCK <id> [TIMEOUT|ERROR] about respool's own client ids: a client blocked on a lease
 * is unblocked by sending CLIENT UNBLOCK for the lease's connection id to its node (the blocked
 * client then gets nil, or Valkey's -UNBLOCKED error). :1 if it was blocked, :0 otherwise.
 */
const clientUnblock: Handler = (session, req) => {
  const { args } = req;
  // Valkey's clientCommand takes UNBLOCK with 3 or 4 arguments (the table's arity is -3).
  if (args.length > 4) return session.replyNow(encodeError(ProxyError.subcommandSyntax('CLIENT', args[1]!.toString('utf8'))));
  let how: 'timeout' | 'error' = 'timeout';
  if (args.length === 4) {
    const mode = args[3]!.toString('latin1').toLowerCase();
    if (mode !== 'timeout' && mode !== 'error') return session.replyNow(encodeError(ProxyError.unblockReason()));
    how = mode;
  }
  const text = args[2]!.toString('latin1');
  if (!/^-?\d+$/.test(text)) return session.replyNow(encodeError(ProxyError.notAnInteger()));
  const id = Number(text);
  let target: HandlerSession | undefined;
  for (const s of session.ctx.sessions()) if (s.id === id) target = s;
  const lease = target?.state.blocked ? target.state.lease : null;
  if (lease?.unblock === undefined) return session.replyNow(ZERO);
  const entry = session.reserve();
  lease.unblock(how).then(
    (done) => entry.fill(done ? ONE : ZERO),
    (err: Error) => entry.fill(encodeError(err.message)),
  );
};

const ONE = encodeInteger(1);
const ZERO = encodeInteger(0);

export { blockingTimeoutMs } from './blocking-timeout.js';
