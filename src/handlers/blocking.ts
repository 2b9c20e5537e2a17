import { encodeError, encodeInteger } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import type { LinkRequest } from '../upstream/link.js';
import type { DedicatedConnection } from '../upstream/dedicated-connection.js';
import type { CommandRequest, Handler, HandlerSession } from './types.js';

/**
 * Blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN/MAX, BZMPOP, XREAD …
 * BLOCK, XREADGROUP … BLOCK) run on a leased connection of their own (upstream/dedicated-pool.ts):
 * a shared link must never wait on one client's command.
 *
 *  - Lane switch = barrier: the command starts once the client's earlier replies are written, and
 *    its later pipelined commands wait behind its reply, as they would on Valkey.
 *  - Deadline: the command's own timeout plus dedicated.blockMarginMs (none for 0 = forever); the
 *    shared links' commandMs never applies.
 *  - The lease goes back clean after the reply. A client that disconnects while blocked: the
 *    pool unblocks the connection (CLIENT UNBLOCK by its id) and reuses it, or closes it.
 *  - MOVED/ASK (the slot moved before the command ran): sent again on the new owner's lease,
 *    within cluster.maxRedirects. Never re-sent after a lost connection: the client gets the error.
 */
export const blocking: Handler = (session, req) => {
  if (req.command === 'client|unblock') return clientUnblock(session, req);
  const ctx = session.ctx;
  const slot = ctx.router.slotOf(req.spec, req.args, ctx.commands());
  if (typeof slot !== 'number') return session.replyNow(slot); // CROSSSLOT, topology unknown
  const raw = Buffer.from(req.raw);
  const keys = req.spec === undefined ? [] : ctx.commands().keyIndexes(req.spec, req.args).map((i) => req.args[i]!.toString('latin1'));
  const blockedOn = { keys, onNoKey: req.command === 'xreadgroup' };
  const parsed = blockingTimeoutMs(req);
  const timeoutMs = parsed === -1 ? ctx.config.timeouts.commandMs : parsed;
  session.runExclusive(() => {
    const entry = session.reserve();
    ctx.metrics?.commandCounter(req.command).inc();
    run(session, raw, slot, timeoutMs, blockedOn, 0, (reply) => entry.fill(reply));
  });
};

/**
 * CLIENT UNBLOCK <id> [TIMEOUT|ERROR] about respool's own client ids: a client blocked on a lease
 * is unblocked by sending CLIENT UNBLOCK for the lease's connection id to its node (the blocked
 * client then gets nil, or Valkey's -UNBLOCKED error). :1 if it was blocked, :0 otherwise.
 */
const clientUnblock: Handler = (session, req) => {
  const { args } = req;
  if (args.length !== 3 && args.length !== 4) return session.replyNow(encodeError(ProxyError.wrongArity('client|unblock')));
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
  const unblock = target?.state.blocked ? target.state.lease?.unblock : undefined;
  if (unblock === undefined) return session.replyNow(ZERO);
  const entry = session.reserve();
  unblock(how).then(
    (done) => entry.fill(done ? ONE : ZERO),
    (err: Error) => entry.fill(encodeError(err.message)),
  );
};

/** What a blocked client waits on, for INFO clients. */
interface BlockedOn {
  keys: string[];
  onNoKey: boolean;
}

/** CLIENT UNBLOCK racing the blocking command to its node: tries, and the pause between them. */
const UNBLOCK_TRIES = 5;
const UNBLOCK_RETRY_MS = 5;

const ONE = encodeInteger(1);
const ZERO = encodeInteger(0);

function run(session: HandlerSession, raw: Buffer, slot: number, timeoutMs: number | null, blockedOn: BlockedOn, redirects: number, done: (reply: Buffer) => void): void {
  const ctx = session.ctx;
  const node = ctx.router.primaryFor(slot);
  if (node === undefined) return done(encodeError(slot < 0 ? ProxyError.topologyUnknown() : ProxyError.slotNotServed(slot)));
  const state = session.state;
  ctx.dedicated.acquire(node.host, node.port, state.protocol, state.db, state.acl.upstream).then(
    (conn) => {
      if (session.closed) return ctx.dedicated.release(conn, true);
      if (timeoutMs !== null) conn.setDeadline(timeoutMs + ctx.config.dedicated.blockMarginMs);
      const lease = {
        abandon: () => ctx.dedicated.abandon(conn),
        // The command may still be on its way to the node: a few quick tries before answering :0.
        unblock: async (how: 'timeout' | 'error') => {
          for (let attempt = 0; attempt < UNBLOCK_TRIES; attempt++) {
            if (await ctx.unblockLease(conn.host, conn.port, conn.clientId, how)) return true;
            if (state.lease !== lease) return false;
            await new Promise((r) => setTimeout(r, UNBLOCK_RETRY_MS));
          }
          return false;
        },
      };
      state.lease = lease;
      conn.send(raw, leaseRequest(session, conn, (reply, clean) => {
        state.lease = null;
        state.unblock();
        conn.setDeadline(null);
        ctx.dedicated.release(conn, clean);
        const moved = clean ? ctx.router.learnRedirect(reply, conn.address) : null;
        if (moved !== null && redirects < ctx.config.cluster.maxRedirects && !session.closed) {
          run(session, raw, moved, timeoutMs, blockedOn, redirects + 1, done);
          return;
        }
        done(reply);
      }));
      if (state.lease === lease) state.block(blockedOn.keys, blockedOn.onNoKey); // INFO clients counts it from now
    },
    (err: Error) => {
      state.unblock();
      done(encodeError(err.message));
    },
  );
}

/** The one reply on a lease (copied: the lease goes back to its pool before the client reads it). */
function leaseRequest(session: HandlerSession, conn: DedicatedConnection, finish: (reply: Buffer, clean: boolean) => void): LinkRequest {
  let finished = false;
  return {
    sentAt: 0,
    onReply(frame) {
      if (finished) return;
      finished = true;
      finish(Buffer.from(frame), true);
    },
    onLinkFailure(error) {
      if (finished) return;
      finished = true;
      session.ctx.log.debug({ node: conn.address, error }, 'leased connection failed under a blocking command');
      finish(encodeError(error), false);
    },
  };
}

const B_BLOCK = 'block';
const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
/** setTimeout's largest delay; the deadline adds dedicated.blockMarginMs on top, so keep room. */
const MAX_TIMER_MS = 2 ** 31 - 1 - 86_400_000;

/**
 * The command's own timeout in ms, null for 0 (wait forever), -1 when it does not parse (the
 * server refuses it at once; the shared links' command timeout bounds the wait). Seconds (float)
 * for the list and sorted-set commands, BLOCK milliseconds for XREAD/XREADGROUP.
 */
export function blockingTimeoutMs(req: CommandRequest): number | null {
  const { args, command } = req;
  let text: string | undefined;
  let scale = 1000;
  if (command === 'xread' || command === 'xreadgroup') {
    scale = 1;
    for (let i = 1; i < args.length - 1; i++) {
      if (args[i]!.length === 5 && args[i]!.toString('latin1').toLowerCase() === B_BLOCK) {
        text = args[i + 1]!.toString('latin1');
        break;
      }
    }
  } else if (command === 'blmpop' || command === 'bzmpop') {
    text = args[1]?.toString('latin1');
  } else {
    text = args[args.length - 1]?.toString('latin1');
  }
  if (text === undefined || !DECIMAL.test(text)) return -1;
  const value = Number(text);
  if (!Number.isFinite(value) || value < 0) return -1;
  const ms = Math.ceil(value * scale);
  // 0 waits forever; so, in practice, does anything past a timer's range (~24.8 days).
  return value === 0 || ms > MAX_TIMER_MS ? null : ms;
}
